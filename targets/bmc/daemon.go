package bmc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DaemonConfig is the file bmc/service writes (0600) and `labbuild __bmc-serve CONFIG` reads:
// everything the BMC process needs, with the secrets by path only, so that no credential is in
// its command line (/proc/PID/cmdline is world-readable).
type DaemonConfig struct {
	// Listen is the address to bind, "IP:port": the lab bridge's address (network.gateway),
	// so that only the lab network (the VMs, the host) reaches the BMC.
	Listen string `json:"listen"`
	// LibvirtURI is libvirt.uri.
	LibvirtURI string `json:"libvirtURI"`
	// CertFile and KeyFile are the serving certificate (issued by the lab's BMC CA) and its key.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// CredentialsFile is the 0600 JSON file of Credentials.
	CredentialsFile string `json:"credentialsFile"`
	// MediaDir holds the downloaded images (Config.MediaDir).
	MediaDir string `json:"mediaDir"`
	// Domains are the lab's domain names (Config.Domains).
	Domains []string `json:"domains"`
	// ReadyFile is written (atomically, with the daemon's pid) once the port is bound, so that
	// the starter knows it serves without having to reach the bridge address itself.
	ReadyFile string `json:"readyFile"`
}

// Credentials are the BMC's HTTP basic-auth user and password (bmc/credentials, 0600).
type Credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// ReadCredentials reads a credentials file, refusing one that others may read.
func ReadCredentials(path string) (Credentials, error) {
	var c Credentials
	st, err := os.Stat(path)
	if err != nil {
		return c, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return c, fmt.Errorf("%s: mode %v: the BMC credentials must be 0600", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if c.Username == "" || c.Password == "" {
		return c, fmt.Errorf("%s: empty username or password", path)
	}
	return c, nil
}

// RunDaemon runs the BMC described by the DaemonConfig at cfgPath until ctx ends, logging one
// line per request to log.
func RunDaemon(ctx context.Context, cfgPath string, log io.Writer) error {
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	var dc DaemonConfig
	if err := json.Unmarshal(b, &dc); err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	creds, err := ReadCredentials(dc.CredentialsFile)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(dc.CertFile, dc.KeyFile)
	if err != nil {
		return fmt.Errorf("BMC serving certificate: %w", err)
	}
	hv, err := DialLibvirt(dc.LibvirtURI)
	if err != nil {
		return err
	}
	defer hv.Close()
	srv, err := New(Config{Hypervisor: hv, Domains: dc.Domains, MediaDir: dc.MediaDir, Username: creds.Username, Password: creds.Password, Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", dc.Listen)
	if err != nil {
		return fmt.Errorf("BMC listen on %s: %w (is the lab bridge up?)", dc.Listen, err)
	}
	if dc.ReadyFile != "" {
		tmp := dc.ReadyFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, dc.ReadyFile); err != nil {
			return err
		}
		defer os.Remove(dc.ReadyFile)
	}
	fmt.Fprintf(log, "%s labbuild BMC serving https://%s/redfish/v1 for %d domains (libvirt %s, media %s)\n",
		time.Now().UTC().Format(time.RFC3339), dc.Listen, len(dc.Domains), dc.LibvirtURI, filepath.Clean(dc.MediaDir))
	err = ServeTLS(ctx, ln, cert, srv)
	srv.Wait()
	return err
}
