package bmc

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/labbuild/labbuild/targets/virt"
)

// Libvirt is the Hypervisor over libvirt's RPC protocol (github.com/digitalocean/go-libvirt,
// through targets/virt's connection): the same calls sushy-tools' dynamic emulator makes
// through libvirt-python (sushy_tools/emulator/resources/systems/libvirtdriver.py), one
// connection shared by all requests (go-libvirt multiplexes calls on it).
type Libvirt struct {
	conn *virt.Conn
	l    *golibvirt.Libvirt
}

// DialLibvirt connects to uri (qemu:///system, qemu+unix:///system?socket=PATH) with
// virt.Connect, labbuild's one libvirt dialer. The BMC downloads images into a local
// directory and attaches them by path, so the daemon must run on this host.
func DialLibvirt(uri string) (*Libvirt, error) {
	c, err := virt.Connect(uri)
	if err != nil {
		return nil, err
	}
	return &Libvirt{conn: c, l: c.RPC()}, nil
}

// Close disconnects.
func (v *Libvirt) Close() error { return v.conn.Close() }

func parseUUID(s string) (golibvirt.UUID, error) {
	var u golibvirt.UUID
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != len(u) || len(s) != 36 {
		return u, ErrNoDomain
	}
	copy(u[:], b)
	return u, nil
}

func formatUUID(u golibvirt.UUID) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (v *Libvirt) lookup(uuid string) (golibvirt.Domain, error) {
	u, err := parseUUID(uuid)
	if err != nil {
		return golibvirt.Domain{}, err
	}
	d, err := v.l.DomainLookupByUUID(u)
	if golibvirt.IsNotFound(err) {
		return d, ErrNoDomain
	}
	return d, err
}

// List implements Hypervisor.
func (v *Libvirt) List() ([]DomainRef, error) {
	ds, _, err := v.l.ConnectListAllDomains(1, golibvirt.ConnectListDomainsActive|golibvirt.ConnectListDomainsInactive)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	out := make([]DomainRef, 0, len(ds))
	for _, d := range ds {
		out = append(out, DomainRef{UUID: formatUUID(d.UUID), Name: d.Name})
	}
	return out, nil
}

// Get implements Hypervisor.
func (v *Libvirt) Get(uuid string) (string, string, bool, error) {
	d, err := v.lookup(uuid)
	if err != nil {
		return "", "", false, err
	}
	st, _, err := v.l.DomainGetState(d, 0)
	if err != nil {
		return "", "", false, fmt.Errorf("domain %s state: %w", d.Name, err)
	}
	pers, err := v.l.DomainGetXMLDesc(d, golibvirt.DomainXMLInactive)
	if err != nil {
		return "", "", false, fmt.Errorf("domain %s XML: %w", d.Name, err)
	}
	on := false
	switch golibvirt.DomainState(st) {
	case golibvirt.DomainRunning, golibvirt.DomainBlocked, golibvirt.DomainPaused, golibvirt.DomainShutdown, golibvirt.DomainPmsuspended:
		on = true
	}
	if !on {
		return pers, "", false, nil
	}
	live, err := v.l.DomainGetXMLDesc(d, 0)
	if err != nil {
		return "", "", false, fmt.Errorf("domain %s live XML: %w", d.Name, err)
	}
	return pers, live, true, nil
}

// Define implements Hypervisor.
func (v *Libvirt) Define(xml string) error {
	_, err := v.l.DomainDefineXML(xml)
	return err
}

// Start implements Hypervisor.
func (v *Libvirt) Start(uuid string) error {
	d, err := v.lookup(uuid)
	if err != nil {
		return err
	}
	return v.l.DomainCreate(d)
}

// ForceOff implements Hypervisor; a domain that is already off is not an error.
func (v *Libvirt) ForceOff(uuid string) error {
	d, err := v.lookup(uuid)
	if err != nil {
		return err
	}
	if err := v.l.DomainDestroy(d); err != nil && !isErr(err, golibvirt.ErrOperationInvalid) {
		return err
	}
	return nil
}

// Shutdown implements Hypervisor.
func (v *Libvirt) Shutdown(uuid string) error {
	d, err := v.lookup(uuid)
	if err != nil {
		return err
	}
	if err := v.l.DomainShutdown(d); err != nil && !isErr(err, golibvirt.ErrOperationInvalid) {
		return err
	}
	return nil
}

// ChangeMedia implements Hypervisor.
func (v *Libvirt) ChangeMedia(uuid, diskXML string) error {
	d, err := v.lookup(uuid)
	if err != nil {
		return err
	}
	return v.l.DomainUpdateDeviceFlags(d, diskXML, golibvirt.DomainDeviceModifyLive|golibvirt.DomainDeviceModifyForce)
}

// Metadata implements Hypervisor.
func (v *Libvirt) Metadata(uuid string) (string, error) {
	d, err := v.lookup(uuid)
	if err != nil {
		return "", err
	}
	m, err := v.l.DomainGetMetadata(d, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{MetadataNS}, golibvirt.DomainAffectConfig)
	if isErr(err, golibvirt.ErrNoDomainMetadata) {
		return "", nil
	}
	return m, err
}

// SetMetadata implements Hypervisor.
func (v *Libvirt) SetMetadata(uuid, xml string) error {
	d, err := v.lookup(uuid)
	if err != nil {
		return err
	}
	return v.l.DomainSetMetadata(d, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{xml},
		golibvirt.OptString{MetadataKey}, golibvirt.OptString{MetadataNS}, golibvirt.DomainAffectConfig)
}

func isErr(err error, n golibvirt.ErrorNumber) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && golibvirt.ErrorNumber(e.Code) == n
}
