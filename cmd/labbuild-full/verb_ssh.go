package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"github.com/labbuild/labbuild/internal/nodessh"
	"github.com/labbuild/labbuild/lab"
)

// The ways into a lab that did not come up, as kcli ssh/console and openshift-install gather
// bootstrap give them: labbuild ssh NODE, labbuild console NODE (console.go), labbuild gather
// (gather.go).

// exitStatus is an exit status to pass on as labbuild's own: the remote command's, as ssh(1)
// exits with it.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// labNode loads the lab config and returns the node named name; an unknown name is a usage
// error listing the nodes.
func (c *cli) labNode(verb, name string) (*lab.Config, lab.Node, error) {
	if _, err := c.options(nil); err != nil {
		return nil, lab.Node{}, err
	}
	cfg := c.cfg // nil with --synthetic
	if cfg == nil {
		return nil, lab.Node{}, usagef("%s: no lab config with --synthetic", verb)
	}
	var names []string
	for _, n := range cfg.Nodes {
		if n.Name == name {
			return cfg, n, nil
		}
		names = append(names, n.Name)
	}
	return nil, lab.Node{}, usagef("%s: no node %q in %s (nodes: %s)", verb, name, c.cfgName, strings.Join(names, ", "))
}

// sshConfig is how labbuild reaches node n: core@IP:22, the keys beside access.sshKeyFile and
// in ~/.ssh, the lab's known_hosts (OUT/.labbuild/known_hosts).
func (c *cli) sshConfig(cfg *lab.Config, n lab.Node) nodessh.Config {
	return nodessh.Config{
		Node: n.Name, Addr: net.JoinHostPort(n.IP, "22"),
		KeyFiles:   nodessh.KeyFiles(lab.ExpandPath(cfg.Access.SSHKeyFile, c.cfgBase)),
		KnownHosts: filepath.Join(c.outDir, ".labbuild", "known_hosts"),
		Notify:     func(m string) { fmt.Fprintf(c.stderr, "labbuild: %s\n", m) },
	}
}

func runSSH(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return usagef("ssh: name a node (labbuild ssh master-0 [-- COMMAND])")
	}
	cfg, n, err := c.labNode("ssh", args[0])
	if err != nil {
		return err
	}
	cl, err := nodessh.Dial(ctx, c.sshConfig(cfg, n))
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	defer cl.Close()
	s, err := cl.NewSession()
	if err != nil {
		return fmt.Errorf("ssh: %s: %w", n.Name, err)
	}
	defer s.Close()
	s.Stdout, s.Stderr = c.stdout, c.stderr
	// Stdin through a pipe of our own: Session.Wait would otherwise wait for os.Stdin to end.
	in, err := s.StdinPipe()
	if err != nil {
		return err
	}
	go func() { io.Copy(in, os.Stdin); in.Close() }()

	cmd := strings.Join(args[1:], " ")
	fd := int(os.Stdin.Fd())
	if cmd == "" && term.IsTerminal(fd) {
		// An interactive login: a pty of the local terminal's size, the local terminal raw,
		// resizes passed on (SIGWINCH → window-change), as ssh(1) does.
		w, h, err := term.GetSize(fd)
		if err != nil {
			w, h = 80, 24
		}
		tt := os.Getenv("TERM")
		if tt == "" {
			tt = "xterm-256color"
		}
		if err := s.RequestPty(tt, h, w, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
			return fmt.Errorf("ssh: %s: pty: %w", n.Name, err)
		}
		old, err := term.MakeRaw(fd)
		if err == nil {
			defer term.Restore(fd, old)
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(fd); err == nil {
					s.WindowChange(h, w)
				}
			}
		}()
		if err := s.Shell(); err != nil {
			return err
		}
		return sshExit(s.Wait())
	}
	if cmd == "" {
		err = s.Shell() // commands from standard input, as `ssh host < script`
		if err == nil {
			err = s.Wait()
		}
		return sshExit(err)
	}
	return sshExit(s.Run(cmd))
}

// sshExit maps the remote command's end to labbuild's exit status: its own status, or 255 when
// it was killed by a signal (ssh(1)'s convention).
func sshExit(err error) error {
	if err == nil {
		return nil
	}
	if ee, ok := err.(*ssh.ExitError); ok {
		if ee.Signal() != "" {
			return exitStatus(255)
		}
		return exitStatus(ee.ExitStatus())
	}
	if _, ok := err.(*ssh.ExitMissingError); ok {
		return exitStatus(255)
	}
	return err
}
