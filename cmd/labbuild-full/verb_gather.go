package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/internal/gather"
	"github.com/labbuild/labbuild/internal/nodessh"
	"github.com/labbuild/labbuild/lab"
)

// runGather is labbuild gather [NODE...]: openshift-install gather bootstrap for a lab, from
// the bootstrap and every master unless nodes are named.
func runGather(ctx context.Context, c *cli, args []string) error {
	if _, err := c.options(nil); err != nil {
		return err
	}
	cfg := c.cfg // nil with --synthetic
	if cfg == nil {
		return usagef("gather: no lab config with --synthetic")
	}
	var nodes []lab.Node
	if len(args) == 0 {
		if b := cfg.Bootstrap(); b.Name != "" { // a single node has none: its master bootstraps in place
			nodes = append(nodes, b)
		}
		nodes = append(nodes, cfg.NodesByRole(lab.RoleMaster)...)
	}
	for _, a := range args {
		_, n, err := c.labNode("gather", a)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	files := map[string][]byte{}
	if rep, err := c.statusJSON(ctx, nil); err != nil {
		files["labbuild/status-error.txt"] = []byte(err.Error() + "\n")
	} else if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		files["labbuild/status.json"] = append(b, '\n')
	}
	if b, err := json.MarshalIndent(cfg.Nodes, "", "  "); err == nil {
		files["labbuild/nodes.json"] = append(b, '\n')
	}
	var gn []gather.Node
	for _, n := range nodes {
		sc := c.sshConfig(cfg, n)
		gn = append(gn, gather.Node{Name: n.Name, Role: n.Role, Dial: func(ctx context.Context) (*ssh.Client, error) {
			return nodessh.Dial(ctx, sc)
		}})
	}
	fmt.Fprintf(c.stdout, "gather: %d nodes: %s\n", len(nodes), nodeNames(nodes))
	res, err := gather.Gather(ctx, gather.Options{
		Dir: filepath.Join(c.outDir, "gather"), Now: time.Now(), Nodes: gn, Files: files,
		Secrets: c.labSecrets(cfg), Progress: c.stdout,
	})
	if err != nil {
		return fmt.Errorf("gather: %w", err)
	}
	line := fmt.Sprintf("labbuild: wrote %s: %d of %d nodes gathered", res.Path, len(res.Gathered), len(nodes))
	if len(res.Unreachable) > 0 {
		var not []string
		for _, n := range nodes {
			if _, ok := res.Unreachable[n.Name]; ok {
				not = append(not, n.Name)
			}
		}
		line += fmt.Sprintf("; NOT gathered: %s (see summary.txt)", strings.Join(not, ", "))
	}
	fmt.Fprintln(c.stdout, line)
	if len(res.Gathered) == 0 {
		return fmt.Errorf("gather: no node could be gathered")
	}
	return nil
}

func nodeNames(ns []lab.Node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// labSecrets are the byte strings no gathered file may hold: the pull secret (the file, each
// auth and its decoded user:password), the kubeadmin password, the SSH private keys labbuild
// would log in with.
func (c *cli) labSecrets(cfg *lab.Config) [][]byte {
	var out [][]byte
	if b, err := lab.ReadFile(lab.ExpandPath(cfg.Access.PullSecretFile, c.cfgBase), lab.MaxFileBytes); err == nil {
		out = append(out, b)
		var ps struct {
			Auths map[string]struct {
				Auth     string `json:"auth"`
				Password string `json:"password"`
			} `json:"auths"`
		}
		if json.Unmarshal(b, &ps) == nil {
			for _, a := range ps.Auths {
				out = append(out, []byte(a.Auth), []byte(a.Password))
				if d, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
					if _, pw, ok := strings.Cut(string(d), ":"); ok {
						out = append(out, []byte(pw))
					}
				}
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(c.outDir, "manifests", "kubeadmin", "kubeadmin-password")); err == nil {
		out = append(out, b)
	}
	for _, p := range nodessh.KeyFiles(lab.ExpandPath(cfg.Access.SSHKeyFile, c.cfgBase)) {
		if b, err := lab.ReadFile(p, lab.MaxFileBytes); err == nil {
			out = append(out, b)
		}
	}
	return out
}
