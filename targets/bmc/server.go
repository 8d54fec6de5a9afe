// Package bmc is labbuild's virtual BMC: a Redfish service over libvirt that lets a
// bare-metal provisioner (Metal3's Ironic, openshift-install's IPI) power, boot and
// virtual-media-boot a lab's VMs as if they were servers. It serves what Ironic's
// redfish-virtualmedia driver uses (ironic/drivers/modules/redfish/boot.py, management.py,
// power.py, through the sushy client): the ServiceRoot, one ComputerSystem per lab VM named
// by its libvirt UUID (PowerState, Boot with @Redfish.AllowableValues, ComputerSystem.Reset),
// and one Manager per system with a virtual CD (VirtualMedia.InsertMedia / EjectMedia) whose
// image is downloaded and attached as the domain's CD-ROM. sushy-tools' dynamic emulator
// (sushy_tools/emulator/resources/systems/libvirtdriver.py, vmedia.py) does the same in
// Python; this one keeps its state in the domain (boot order, <metadata>), serializes the
// requests to one system, and serves TLS with HTTP basic auth only.
package bmc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a Server.
type Config struct {
	// Hypervisor is libvirt (DialLibvirt) or a test's fake.
	Hypervisor Hypervisor
	// Domains, when set, are the names of the domains the BMC serves (the lab's VMs); others
	// are invisible (404), so one lab's BMC cannot power another lab's VMs.
	Domains []string
	// MediaDir holds downloaded images; libvirtd must be able to read it (the lab's pool
	// directory or a directory next to it). Files are 0644 in it, one per inserted image.
	MediaDir string
	// Username and Password are the HTTP basic-auth credentials every request but the
	// ServiceRoot needs (the Redfish spec leaves /redfish and /redfish/v1/ open).
	Username, Password string
	// Fetch downloads InsertMedia's images (http and https URLs) for a VirtualMedia whose
	// VerifyCertificate is true, verifying https servers against the system's roots;
	// http.DefaultClient when nil.
	Fetch *http.Client
	// FetchUnverified downloads them otherwise, the default: it does not verify an https
	// server's certificate, as real BMCs and sushy-tools do not (sushy-tools
	// emulator/resources/vmedia.py insert_image, SUSHY_EMULATOR_VMEDIA_VERIFY_SSL False: "it's
	// de facto standard for Redfish to default to no certificate validation"). Ironic serves
	// virtual media over TLS with a CA of its own (cluster-baremetal-operator
	// provisioning/baremetal_crypto.go, "metal3-ironic"; issue 38 #4). Nil: a client on a copy
	// of http.DefaultTransport with InsecureSkipVerify.
	FetchUnverified *http.Client
	// MaxImageBytes bounds a download; 16 GiB when zero.
	MaxImageBytes int64
	// GracefulTimeout bounds GracefulRestart's wait for the guest to power off (5 minutes when
	// zero); PollInterval is how often it looks (1 s when zero).
	GracefulTimeout, PollInterval time.Duration
	// Log receives one line per request and background errors; never credentials.
	Log io.Writer
}

// Server is the Redfish service; it is an http.Handler.
type Server struct {
	cfg   Config
	hv    Hypervisor
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	bg    sync.WaitGroup
	logMu sync.Mutex
}

// New returns a Server; it fails when cfg lacks a hypervisor, credentials or a media
// directory.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Hypervisor == nil:
		return nil, errors.New("redfish: no hypervisor")
	case cfg.Username == "" || cfg.Password == "":
		return nil, errors.New("redfish: no credentials: the BMC does not serve without basic auth")
	case !filepath.IsAbs(cfg.MediaDir):
		return nil, fmt.Errorf("redfish: media directory %q: want an absolute path", cfg.MediaDir)
	}
	if cfg.Fetch == nil {
		cfg.Fetch = http.DefaultClient
	}
	if cfg.FetchUnverified == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // a BMC's default: see FetchUnverified
		cfg.FetchUnverified = &http.Client{Transport: tr}
	}
	if cfg.MaxImageBytes == 0 {
		cfg.MaxImageBytes = 16 << 30
	}
	if cfg.GracefulTimeout == 0 {
		cfg.GracefulTimeout = 5 * time.Minute
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	cfg.MediaDir = filepath.Clean(cfg.MediaDir)
	if err := os.MkdirAll(cfg.MediaDir, 0o755); err != nil {
		return nil, fmt.Errorf("redfish: media directory: %w", err)
	}
	return &Server{cfg: cfg, hv: cfg.Hypervisor, locks: map[string]*sync.Mutex{}}, nil
}

// Wait waits for background work (GracefulRestart's restarts) to end.
func (s *Server) Wait() { s.bg.Wait() }

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Log == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.cfg.Log, time.Now().UTC().Format(time.RFC3339)+" "+format+"\n", args...)
}

// lock serializes everything done to one system, so that concurrent clients never see or leave
// a half-applied change (a defined XML without its metadata, a CD-ROM swapped mid-read).
func (s *Server) lock(uuid string) func() {
	s.mu.Lock()
	l, ok := s.locks[uuid]
	if !ok {
		l = &sync.Mutex{}
		s.locks[uuid] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// systems returns the served domains.
func (s *Server) systems() ([]DomainRef, error) {
	all, err := s.hv.List()
	if err != nil {
		return nil, err
	}
	var out []DomainRef
	for _, d := range all {
		if len(s.cfg.Domains) == 0 || slices.Contains(s.cfg.Domains, d.Name) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b DomainRef) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// found is find for a request: it answers 500 (GeneralError) when libvirt fails and 404 for a
// system it does not serve, and reports whether the request goes on.
func (s *Server) found(w http.ResponseWriter, r *http.Request, id string) (DomainRef, bool) {
	ref, ok, err := s.find(id)
	if err != nil {
		s.internal(w, err)
		return DomainRef{}, false
	}
	if !ok {
		notFound(w, r.URL.Path)
	}
	return ref, ok
}

// find returns the served domain whose libvirt UUID is id.
func (s *Server) find(id string) (DomainRef, bool, error) {
	all, err := s.systems()
	if err != nil {
		return DomainRef{}, false, err
	}
	for _, d := range all {
		if d.UUID == strings.ToLower(id) {
			return d, true, nil
		}
	}
	return DomainRef{}, false, nil
}

type obj = map[string]any

func link(p string) obj { return obj{"@odata.id": p} }

const (
	root     = "/redfish/v1"
	systemsP = root + "/Systems"
	managerP = root + "/Managers"
)

// statusWriter records the status for the request log.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: 200}
	s.serve(sw, r)
	s.logf("%s %s %s %d", r.RemoteAddr, r.Method, r.URL.Path, sw.code)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	open := p == "/redfish" || p == root
	if !open && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="labbuild BMC"`)
		writeError(w, http.StatusUnauthorized, "NoValidSession", "There is no valid session established with the implementation: the user name or password is wrong.", "Establish a session before attempting any operations.")
		return
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	switch {
	case p == "/redfish":
		s.get(w, r, func() (obj, error) { return obj{"v1": root + "/"}, nil })
	case p == root:
		s.get(w, r, s.serviceRoot)
	case p == systemsP:
		s.get(w, r, func() (obj, error) {
			return s.collection(systemsP, "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection")
		})
	case p == managerP:
		s.get(w, r, func() (obj, error) {
			return s.collection(managerP, "#ManagerCollection.ManagerCollection", "Manager Collection")
		})
	case len(parts) >= 4 && parts[2] == "Systems":
		s.systemRoute(w, r, parts[3], parts[4:])
	case len(parts) >= 4 && parts[2] == "Managers":
		s.managerRoute(w, r, parts[3], parts[4:])
	default:
		notFound(w, r.URL.Path)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	if !ok {
		return false
	}
	// Compare digests so that the time taken does not depend on where the strings differ
	// nor on their lengths.
	hu, wu := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(s.cfg.Username))
	hp, wp := sha256.Sum256([]byte(p)), sha256.Sum256([]byte(s.cfg.Password))
	return subtle.ConstantTimeCompare(hu[:], wu[:])&subtle.ConstantTimeCompare(hp[:], wp[:]) == 1
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, f func() (obj, error)) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET")
		return
	}
	o, err := f()
	if err != nil {
		s.internal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Server) serviceRoot() (obj, error) {
	return obj{
		"@odata.type":    "#ServiceRoot.v1_5_0.ServiceRoot",
		"@odata.id":      root,
		"Id":             "RootService",
		"Name":           "labbuild virtual BMC",
		"RedfishVersion": "1.8.0",
		"Systems":        link(systemsP),
		"Managers":       link(managerP),
		"Links":          obj{},
	}, nil
}

func (s *Server) collection(base, typ, name string) (obj, error) {
	refs, err := s.systems()
	if err != nil {
		return nil, err
	}
	members := []obj{}
	for _, d := range refs {
		members = append(members, link(base+"/"+d.UUID))
	}
	return obj{
		"@odata.type":         typ,
		"@odata.id":           base,
		"Name":                name,
		"Members":             members,
		"Members@odata.count": len(members),
	}, nil
}

// withSystem finds id, locks it, loads it and runs f under the lock; it answers 404 for a
// system it does not serve and 500 (GeneralError) when f or libvirt fails.
func (s *Server) withSystem(w http.ResponseWriter, r *http.Request, id string, f func(*system) error) {
	ref, ok := s.found(w, r, id)
	if !ok {
		return
	}
	unlock := s.lock(ref.UUID)
	defer unlock()
	sys, err := s.load(ref)
	if errors.Is(err, ErrNoDomain) {
		notFound(w, r.URL.Path)
		return
	}
	if err != nil {
		s.internal(w, err)
		return
	}
	if err := f(sys); err != nil {
		s.internal(w, err)
	}
}

func (s *Server) systemRoute(w http.ResponseWriter, r *http.Request, id string, rest []string) {
	switch {
	case len(rest) == 0:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.withSystem(w, r, id, func(sys *system) error { writeJSON(w, 200, s.systemJSON(sys)); return nil })
		case http.MethodPatch:
			s.patchSystem(w, r, id)
		default:
			methodNotAllowed(w, r, "GET, PATCH")
		}
	case len(rest) == 2 && rest[0] == "Actions" && rest[1] == "ComputerSystem.Reset":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		var body struct{ ResetType *string }
		if !readBody(w, r, &body) {
			return
		}
		if body.ResetType == nil {
			writeError(w, 400, "ActionParameterMissing", "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.", "Supply the action with the required parameter in the request body when the request is resubmitted.", "ComputerSystem.Reset", "ResetType")
			return
		}
		if !validValue(*body.ResetType, ResetTypes) {
			notInList(w, *body.ResetType, "ResetType", ResetTypes)
			return
		}
		s.withSystem(w, r, id, func(sys *system) error {
			if err := s.reset(sys, *body.ResetType); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		})
	default:
		notFound(w, r.URL.Path)
	}
}

func (s *Server) systemJSON(sys *system) obj {
	target, enabled, mode := sys.boot()
	power := "Off"
	if sys.on {
		power = "On"
	}
	p := systemsP + "/" + sys.ref.UUID
	o := obj{
		"@odata.type":  "#ComputerSystem.v1_10_0.ComputerSystem",
		"@odata.id":    p,
		"Id":           sys.ref.UUID,
		"Name":         sys.ref.Name,
		"UUID":         sys.ref.UUID,
		"SystemType":   "Virtual",
		"Manufacturer": "labbuild",
		"Model":        "libvirt domain",
		"PowerState":   power,
		"Status":       obj{"State": "Enabled", "Health": "OK"},
		"Boot": obj{
			"BootSourceOverrideTarget":                          target,
			"BootSourceOverrideTarget@Redfish.AllowableValues":  BootTargets,
			"BootSourceOverrideEnabled":                         enabled,
			"BootSourceOverrideEnabled@Redfish.AllowableValues": BootEnabled,
			"BootSourceOverrideMode":                            mode,
			"BootSourceOverrideMode@Redfish.AllowableValues":    BootModes,
		},
		"Links": obj{"ManagedBy": []obj{link(managerP + "/" + sys.ref.UUID)}},
		"Actions": obj{"#ComputerSystem.Reset": obj{
			"target":                            p + "/Actions/ComputerSystem.Reset",
			"ResetType@Redfish.AllowableValues": ResetTypes,
		}},
	}
	if d := sys.persistent; d.VCPU != nil {
		o["ProcessorSummary"] = obj{"Count": d.VCPU.Value}
	}
	if d := sys.persistent; d.Memory != nil {
		o["MemorySummary"] = obj{"TotalSystemMemoryGiB": float64(memKiB(d.Memory.Value, d.Memory.Unit)) / (1 << 20)}
	}
	return o
}

func memKiB(v uint, unit string) uint64 {
	switch unit {
	case "b", "bytes":
		return uint64(v) >> 10
	case "M", "MiB":
		return uint64(v) << 10
	case "G", "GiB":
		return uint64(v) << 20
	}
	return uint64(v) // KiB, libvirt's default
}

// patchSystem applies {"Boot": {...}}. Every value is checked before anything changes: a bad
// one is 400 PropertyValueNotInList naming the property and its AllowableValues.
func (s *Server) patchSystem(w http.ResponseWriter, r *http.Request, id string) {
	var body map[string]json.RawMessage
	if !readBody(w, r, &body) {
		return
	}
	bootRaw, ok := body["Boot"]
	for k := range body {
		if k != "Boot" {
			writeError(w, 400, "PropertyNotWritable", fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k), "Remove the property from the request body and resubmit the request if the operation failed.", k)
			return
		}
	}
	if !ok {
		writeError(w, 400, "PropertyMissing", "The property Boot is a required property and must be included in the request.", "Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed.", "Boot")
		return
	}
	var boot map[string]any
	if err := json.Unmarshal(bootRaw, &boot); err != nil {
		malformed(w, err)
		return
	}
	fields := map[string][]string{"BootSourceOverrideTarget": BootTargets, "BootSourceOverrideEnabled": BootEnabled, "BootSourceOverrideMode": BootModes}
	vals := map[string]string{}
	for k, v := range boot {
		allowed, known := fields[k]
		if !known {
			writeError(w, 400, "PropertyNotWritable", fmt.Sprintf("The property Boot/%s is a read only property and cannot be assigned a value.", k), "Remove the property from the request body and resubmit the request if the operation failed.", "Boot/"+k)
			return
		}
		str, isStr := v.(string)
		if !isStr {
			writeError(w, 400, "PropertyValueTypeError", fmt.Sprintf("The value %v for the property Boot/%s is of a different type than the property can accept.", v, k), "Correct the value for the property in the request body and resubmit the request if the operation failed.", fmt.Sprint(v), "Boot/"+k)
			return
		}
		if !validValue(str, allowed) {
			notInList(w, str, "Boot/"+k, allowed)
			return
		}
		vals[k] = str
	}
	s.withSystem(w, r, id, func(sys *system) error {
		sys.setBoot(vals["BootSourceOverrideTarget"], vals["BootSourceOverrideEnabled"], vals["BootSourceOverrideMode"])
		if err := s.save(sys, true); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func (s *Server) managerRoute(w http.ResponseWriter, r *http.Request, id string, rest []string) {
	p := managerP + "/" + strings.ToLower(id)
	vm := p + "/VirtualMedia"
	switch {
	case len(rest) == 0:
		s.withSystem(w, r, id, func(sys *system) error {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				methodNotAllowed(w, r, "GET")
				return nil
			}
			writeJSON(w, 200, obj{
				"@odata.type":  "#Manager.v1_3_1.Manager",
				"@odata.id":    p,
				"Id":           sys.ref.UUID,
				"Name":         "BMC of " + sys.ref.Name,
				"ManagerType":  "BMC",
				"UUID":         sys.ref.UUID,
				"Status":       obj{"State": "Enabled", "Health": "OK"},
				"VirtualMedia": link(vm),
				"Links":        obj{"ManagerForServers": []obj{link(systemsP + "/" + sys.ref.UUID)}},
			})
			return nil
		})
	case len(rest) == 1 && rest[0] == "VirtualMedia":
		s.withSystem(w, r, id, func(sys *system) error {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				methodNotAllowed(w, r, "GET")
				return nil
			}
			writeJSON(w, 200, obj{
				"@odata.type":         "#VirtualMediaCollection.VirtualMediaCollection",
				"@odata.id":           vm,
				"Name":                "Virtual Media Services",
				"Members":             []obj{link(vm + "/Cd")},
				"Members@odata.count": 1,
			})
			return nil
		})
	case len(rest) == 2 && rest[0] == "VirtualMedia" && rest[1] == "Cd":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.withSystem(w, r, id, func(sys *system) error {
				writeJSON(w, 200, s.mediaJSON(sys, vm+"/Cd"))
				return nil
			})
		case http.MethodPatch:
			s.patchMedia(w, r, id)
		default:
			methodNotAllowed(w, r, "GET, PATCH")
		}
	case len(rest) == 4 && rest[0] == "VirtualMedia" && rest[1] == "Cd" && rest[2] == "Actions":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		switch rest[3] {
		case "VirtualMedia.InsertMedia":
			s.insertMedia(w, r, id)
		case "VirtualMedia.EjectMedia":
			var body map[string]any
			if !readBody(w, r, &body) {
				return
			}
			s.withSystem(w, r, id, func(sys *system) error {
				if err := s.eject(sys); err != nil {
					return err
				}
				w.WriteHeader(http.StatusNoContent)
				return nil
			})
		default:
			notFound(w, r.URL.Path)
		}
	default:
		notFound(w, r.URL.Path)
	}
}

func (s *Server) mediaJSON(sys *system, p string) obj {
	image, inserted := sys.media()
	name := ""
	if image != "" {
		if u, err := url.Parse(image); err == nil {
			name = filepath.Base(u.Path)
		}
	}
	return obj{
		"@odata.type":    "#VirtualMedia.v1_4_0.VirtualMedia",
		"@odata.id":      p,
		"Id":             "Cd",
		"Name":           "Virtual CD",
		"MediaTypes":     []string{"CD", "DVD"},
		"Image":          image,
		"ImageName":      name,
		"Inserted":       inserted,
		"WriteProtected": true,
		"ConnectedVia":   map[bool]string{true: "URI", false: "NotConnected"}[inserted],
		// VerifyCertificate: whether InsertMedia verifies an https image server (false unless
		// PATCHed; sushy-tools' virtual_media.json has it).
		"VerifyCertificate": sys.st.VerifyCertificate,
		"Actions": obj{
			"#VirtualMedia.InsertMedia": obj{"target": p + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  obj{"target": p + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
}

// patchMedia sets the virtual CD's VerifyCertificate, the one writable property, as
// sushy-tools' controllers/virtual_media.py virtual_media_patch does (a boolean, or 400).
func (s *Server) patchMedia(w http.ResponseWriter, r *http.Request, id string) {
	var body map[string]json.RawMessage
	if !readBody(w, r, &body) {
		return
	}
	for k := range body {
		if k != "VerifyCertificate" {
			writeError(w, 400, "PropertyNotWritable", fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k), "Remove the property from the request body and resubmit the request if the operation failed.", k)
			return
		}
	}
	raw, ok := body["VerifyCertificate"]
	if !ok {
		writeError(w, 400, "PropertyMissing", "The property VerifyCertificate is a required property and must be included in the request.", "Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed.", "VerifyCertificate")
		return
	}
	var verify bool
	if err := json.Unmarshal(raw, &verify); err != nil {
		writeError(w, 400, "PropertyValueTypeError", fmt.Sprintf("The value %s for the property VerifyCertificate is of a different type than the property can accept: want a boolean.", raw), "Correct the value for the property in the request body and resubmit the request if the operation failed.", string(raw), "VerifyCertificate")
		return
	}
	s.withSystem(w, r, id, func(sys *system) error {
		sys.st.VerifyCertificate = verify
		if err := s.save(sys, false); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// insertMedia downloads the image (outside the system's lock: a large ISO must not stall
// power requests), then attaches it under the lock and deletes the image it replaces.
func (s *Server) insertMedia(w http.ResponseWriter, r *http.Request, id string) {
	var body struct {
		Image          *string
		Inserted       *bool
		WriteProtected *bool
		TransferMethod *string
	}
	if !readBody(w, r, &body) {
		return
	}
	if body.Image == nil || *body.Image == "" {
		writeError(w, 400, "ActionParameterMissing", "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.", "Supply the action with the required parameter in the request body when the request is resubmitted.", "VirtualMedia.InsertMedia", "Image")
		return
	}
	if body.Inserted != nil && !*body.Inserted {
		writeError(w, 400, "ActionParameterValueNotInList", "The value false for the parameter Inserted in the action VirtualMedia.InsertMedia is not in the list of acceptable values; AllowableValues: true.", "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.", "false", "Inserted", "VirtualMedia.InsertMedia")
		return
	}
	if body.WriteProtected != nil && !*body.WriteProtected {
		writeError(w, 400, "ActionParameterValueNotInList", "The value false for the parameter WriteProtected in the action VirtualMedia.InsertMedia is not in the list of acceptable values; AllowableValues: true (the virtual CD is read-only).", "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.", "false", "WriteProtected", "VirtualMedia.InsertMedia")
		return
	}
	u, err := url.Parse(*body.Image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		writeError(w, 400, "ActionParameterValueFormatError", fmt.Sprintf("The value %s for the parameter Image in the action VirtualMedia.InsertMedia is of a different format than the parameter can accept: want an http or https URL.", *body.Image), "Correct the value for the parameter in the request body and resubmit the request if the operation failed.", *body.Image, "Image", "VirtualMedia.InsertMedia")
		return
	}
	ref, ok := s.found(w, r, id)
	if !ok {
		return
	}
	verify, loaded := false, false
	s.withSystem(w, r, id, func(sys *system) error { verify, loaded = sys.st.VerifyCertificate, true; return nil })
	if !loaded {
		return // withSystem answered (404, 500)
	}
	file, err := s.download(r, ref, u, verify)
	if err != nil {
		writeError(w, 400, "ResourceAtUriUnauthorized", fmt.Sprintf("While accessing the resource at %s, the service received an authorization error or could not fetch it: %v.", u.Redacted(), err), "Ensure that the appropriate access is provided for the service in order for it to access the URI.", u.Redacted(), err.Error())
		return
	}
	s.withSystem(w, r, id, func(sys *system) error {
		if err := s.insert(sys, u.String(), file); err != nil {
			s.removeMedia(file)
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// download fetches u into the media directory, verifying an https server's certificate only
// when verify (the VirtualMedia's VerifyCertificate).
func (s *Server) download(r *http.Request, ref DomainRef, u *url.URL, verify bool) (string, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	fetch := s.cfg.FetchUnverified
	if verify {
		fetch = s.cfg.Fetch
	}
	resp, err := fetch.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	f, err := os.CreateTemp(s.cfg.MediaDir, ref.UUID+"-*.iso")
	if err != nil {
		return "", err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, s.cfg.MaxImageBytes+1))
	if err == nil && n > s.cfg.MaxImageBytes {
		err = fmt.Errorf("image larger than %d bytes", s.cfg.MaxImageBytes)
	}
	if err == nil {
		err = f.Chmod(0o644) // QEMU runs as another user (libvirt-qemu)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// insert attaches file (downloaded from image) as the system's CD-ROM; eject empties it.
func (s *Server) insert(sys *system, image, file string) error { return s.setMedia(sys, image, file) }

func (s *Server) eject(sys *system) error { return s.setMedia(sys, "", "") }

// setMedia points the CD-ROM at file ("" to eject) in the persistent definition and the
// metadata, then in the running domain, and deletes the image it replaces.
func (s *Server) setMedia(sys *system, image, file string) error {
	old := sys.st.File
	live := sys.attach(file)
	sys.st.Image, sys.st.File = image, file
	if err := s.save(sys, true); err != nil {
		return err
	}
	if live != nil {
		x, err := live.Marshal()
		if err != nil {
			return err
		}
		if err := s.hv.ChangeMedia(sys.ref.UUID, x); err != nil {
			return fmt.Errorf("domain %s: change the live CD-ROM: %w", sys.ref.Name, err)
		}
	}
	if old != file {
		s.removeMedia(old)
	}
	return nil
}

// ServeTLS serves h on ln over TLS only (1.2 or later, with cert) until ctx ends, then shuts
// down gracefully. There is no plain-HTTP listener: a plain request on the port is answered by
// net/http's "400 Client sent an HTTP request to an HTTPS server" and reaches no handler.
func ServeTLS(ctx context.Context, ln net.Listener, cert tls.Certificate, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // TLS handshake noise from scanners
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		case <-done:
		}
	}()
	err := srv.ServeTLS(ln, "", "")
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
