package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/targets"
)

// runCerts lists the built certificates on the clock (--now, hidden, for tests).
func runCerts(ctx context.Context, c *cli, args []string) error {
	now := time.Now()
	if c.now != "" {
		t, err := time.Parse(time.RFC3339, c.now)
		if err != nil {
			return usagef("--now: %v", err)
		}
		now = t
	}
	infos, err := targets.Certs(c.outDir, now)
	if err != nil {
		return err
	}
	// Each certificate's renewal point is its target's recorded stale time (read-only: the
	// state is opened and closed, never written).
	if st, err := cache.LoadState(filepath.Join(c.outDir, ".labbuild", "state")); err == nil {
		for i := range infos {
			if ts := st.Target(infos[i].Target); ts != nil && ts.StaleAt != 0 {
				at := time.Unix(0, ts.StaleAt).UTC()
				infos[i].RenewAt = &at
			}
		}
		st.Close()
	}
	return writeCertReport(c.stdout, c.outDir, infos, now, c.json)
}

// writeCertReport writes `labbuild certs`: the certificates built under outDir
// (targets.Certs), as a table or, with jsonOut, as JSON. A certificate past its own renewal
// point (CertInfo.RenewAt: the next build issues it again) is marked "(renew)", an expired one
// EXPIRED, so the user sees it before a boot fails.
func writeCertReport(w io.Writer, outDir string, infos []targets.CertInfo, now time.Time, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if infos == nil {
			infos = []targets.CertInfo{}
		}
		return enc.Encode(infos)
	}
	if len(infos) == 0 {
		fmt.Fprintf(w, "no certificates under %s (run `labbuild pki`)\n", outDir)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tSUBJECT\tISSUER\tUSAGES\tSANS\tNOT AFTER\tLEFT")
	for _, in := range infos {
		sans := append(append([]string(nil), in.DNSNames...), in.IPs...)
		renew := in.RenewAt != nil && !now.Before(*in.RenewAt)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Target, in.Subject, in.Issuer, strings.Join(in.Usages, ","),
			strings.Join(sans, ","), in.NotAfter.Format(time.RFC3339), certLeft(time.Duration(in.Left)*time.Second, renew))
	}
	return tw.Flush()
}

// certLeft is the LEFT column: whole days, or hours and minutes under a day, then "(renew)"
// when the certificate is past its renewal point; EXPIRED once it is past NotAfter.
func certLeft(d time.Duration, renew bool) string {
	var s string
	switch {
	case d <= 0:
		return "EXPIRED"
	case d < 24*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	if renew {
		s += " (renew)"
	}
	return s
}
