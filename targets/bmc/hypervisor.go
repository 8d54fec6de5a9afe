package bmc

// Hypervisor is what the BMC needs from libvirt, one call per libvirt API it uses, so that the
// server's logic (boot overrides, virtual media, the reset types) is tested against a fake and
// run against go-libvirt (Libvirt) unchanged. Domains are named by their libvirt UUID in the
// canonical 8-4-4-4-12 lower-case form, the Redfish System Id.
type Hypervisor interface {
	// List returns every domain libvirt knows, running or not.
	List() ([]DomainRef, error)
	// Get returns the domain's persistent definition (virDomainGetXMLDesc with
	// VIR_DOMAIN_XML_INACTIVE), its live definition when it runs ("" otherwise) and whether it
	// runs (VIR_DOMAIN_RUNNING, BLOCKED, PAUSED, SHUTDOWN or PMSUSPENDED). An unknown UUID is
	// ErrNoDomain.
	Get(uuid string) (persistent, live string, on bool, err error)
	// Define replaces the persistent definition (virDomainDefineXML); a running domain keeps
	// its live one until it is next started.
	Define(xml string) error
	// Start boots the domain from its persistent definition (virDomainCreate).
	Start(uuid string) error
	// ForceOff pulls the plug (virDomainDestroy).
	ForceOff(uuid string) error
	// Shutdown presses the ACPI power button (virDomainShutdown); the guest decides.
	Shutdown(uuid string) error
	// ChangeMedia updates the running domain's CD-ROM to diskXML, a <disk device='cdrom'>
	// with or without a <source> (virDomainUpdateDeviceFlags, VIR_DOMAIN_AFFECT_LIVE|FORCE).
	ChangeMedia(uuid, diskXML string) error
	// Metadata returns the persistent <metadata> element in namespace MetadataNS ("" when
	// there is none); SetMetadata replaces it (virDomainSetMetadata, VIR_DOMAIN_AFFECT_CONFIG).
	Metadata(uuid string) (string, error)
	SetMetadata(uuid, xml string) error
}

// DomainRef names one domain.
type DomainRef struct {
	UUID string
	Name string
}

// ErrNoDomain is the Hypervisor's answer for a UUID libvirt does not know. (A typed value,
// not errors.New: no package initializer in labbuild's binary.)
var ErrNoDomain error = noDomain{}

type noDomain struct{}

func (noDomain) Error() string { return "no such domain" }

// MetadataNS is the XML namespace of the BMC's state kept in each domain's <metadata>
// (boot override, inserted image), so that the state survives a restart of the BMC and two
// BMC processes never disagree; MetadataKey is its element prefix.
const (
	MetadataNS  = "https://labbuild.dev/xmlns/bmc/1"
	MetadataKey = "labbuild-bmc"
)
