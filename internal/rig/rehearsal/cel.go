package rehearsal

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// CEL131 matches a CEL call of the IP and CIDR libraries (isIP, ip, isCIDR, cidr). Kubernetes
// 1.30 carries them but compiles new expressions in its 1.29 environment
// (k8s.io/apiserver/pkg/cel/environment DefaultCompatibilityVersion), so a CRD rule calling
// them is refused with "undeclared reference to 'isIP'"; 1.31, the Kubernetes OpenShift 4.18
// runs, accepts them. The rehearsal's kube-apiserver is upstream 1.30.14, the newest whose
// modules the Go module proxy serves whole.
var CEL131 = regexp.MustCompile(`\b(isIP|isCIDR|ip|cidr)\(`)

// DroppedRule is one x-kubernetes-validations rule AdaptCRDsFor130 removed.
type DroppedRule struct {
	// File is the node path of the manifest; Path the YAML path of the schema node that held
	// the rule (spec.versions[0].schema.openAPIV3Schema.properties.status…).
	File, Path, Rule string
}

// CRDDirs are the bootstrap node's directories whose CRDs bootkube.sh applies
// (render/ignition BootstrapCRDDir and BootstrapManifestDir).
var CRDDirs = []string{"/opt/openshift/crds", "/opt/openshift/manifests"}

// AdaptCRDsFor130 rewrites, under the node root, every CustomResourceDefinition in CRDDirs
// whose x-kubernetes-validations rules call CEL131: those rules are removed (an emptied list
// goes too) and nothing else changes meaning — the file is re-encoded from its YAML node tree,
// so scalars keep their text. It is the rehearsal's stand-in for OpenShift's 1.31
// kube-apiserver: only the IP-family checks of those fields are lost. It returns the rules
// dropped, sorted by file and path; files without such a rule are left byte for byte.
func AdaptCRDsFor130(root string) ([]DroppedRule, error) {
	var out []DroppedRule
	for _, d := range CRDDirs {
		names, err := filepath.Glob(filepath.Join(root, d, "*"))
		if err != nil {
			return nil, err
		}
		for _, p := range names {
			if !strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml") {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			nodePath := d + "/" + filepath.Base(p)
			nb, dropped, err := DropCEL131(b)
			if err != nil {
				return nil, fmt.Errorf("rehearsal: %s: %w", nodePath, err)
			}
			if len(dropped) == 0 {
				continue
			}
			for i := range dropped {
				dropped[i].File = nodePath
			}
			out = append(out, dropped...)
			if err := os.WriteFile(p, nb, 0o644); err != nil {
				return nil, err
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// DropCEL131 removes the CEL131 rules from every CustomResourceDefinition document of a YAML
// stream and returns the new stream (b itself when nothing was dropped) and the rules dropped
// (File empty).
func DropCEL131(b []byte) ([]byte, []DroppedRule, error) {
	if !CEL131.Match(b) {
		return b, nil, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []*yaml.Node
	var dropped []DroppedRule
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if len(doc.Content) == 1 && mapValue(doc.Content[0], "kind") != nil && mapValue(doc.Content[0], "kind").Value == "CustomResourceDefinition" {
			dropped = append(dropped, dropRules(doc.Content[0], "")...)
		}
		docs = append(docs, &doc)
	}
	if len(dropped) == 0 {
		return b, nil, nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), dropped, nil
}

// mapValue returns the value node of key in mapping node n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// dropRules walks n (at YAML path at) and removes CEL131 rules from each
// x-kubernetes-validations sequence, deleting the key when none is left.
func dropRules(n *yaml.Node, at string) []DroppedRule {
	var out []DroppedRule
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if at != "" {
				p = at + "." + k.Value
			}
			if k.Value == "x-kubernetes-validations" && v.Kind == yaml.SequenceNode {
				var keep []*yaml.Node
				for _, r := range v.Content {
					if rule := mapValue(r, "rule"); rule != nil && CEL131.MatchString(rule.Value) {
						out = append(out, DroppedRule{Path: at, Rule: rule.Value})
						continue
					}
					keep = append(keep, r)
				}
				v.Content = keep
				if len(keep) == 0 {
					n.Content = append(n.Content[:i], n.Content[i+2:]...)
					i -= 2
				}
				continue
			}
			out = append(out, dropRules(v, p)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			out = append(out, dropRules(c, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return out
}
