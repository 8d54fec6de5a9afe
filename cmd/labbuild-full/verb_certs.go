package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

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
	return writeCertReport(c.stdout, c.outDir, infos, c.json)
}

// writeCertReport writes `labbuild certs`: the certificates built under outDir
// (targets.Certs), as a table or, with jsonOut, as JSON. A certificate within a day of
// expiry, or expired, is marked so the user sees it before a boot fails.
func writeCertReport(w io.Writer, outDir string, infos []targets.CertInfo, jsonOut bool) error {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Target, in.Subject, in.Issuer, strings.Join(in.Usages, ","),
			strings.Join(sans, ","), in.NotAfter.Format(time.RFC3339), certLeft(time.Duration(in.Left)*time.Second))
	}
	return tw.Flush()
}

// certLeft is the LEFT column: whole days, hours and minutes with "(renew)" under a day, or
// EXPIRED.
func certLeft(d time.Duration) string {
	switch {
	case d <= 0:
		return "EXPIRED"
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm (renew)", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
