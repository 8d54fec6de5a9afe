package rehearsal

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// PodManifestDir is the kubelet's --pod-manifest-path on every OpenShift node.
const PodManifestDir = "/etc/kubernetes/manifests"

// Container is one static pod container as the rehearsal runs it: the program its command
// names, its argv (command and args exactly as the manifest has them, the program first), its
// environment, and its volumes as bind mounts (mountPath → hostPath, both node paths).
type Container struct {
	// File is the manifest's file name in PodManifestDir.
	File      string
	Pod, Name string
	// Program is what runs: the command's base name, or for OpenShift's "hyperkube <cmd>"
	// the command it names (kube-apiserver).
	Program string
	// Args follow the program (the manifest's remaining command words, then args).
	Args  []string
	Env   []string
	Binds [][2]string
	// HostPaths are the node paths of every volume the container mounts, those at the same
	// path in the pod (no Bind) included: what a copy of the pod onto another node must bring.
	HostPaths []string
	Image     string
}

// StaticPods reads every pod manifest under root+PodManifestDir (*.yaml, *.json, name order)
// and returns its containers. hostPath and emptyDir volumes are supported (EmptyDirPath): the
// bootstrap's static pods use no other kind.
func StaticPods(root string) ([]Container, error) {
	dir := filepath.Join(root, PodManifestDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rehearsal: %w", err)
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".json")) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []Container
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		// Not strict: the kubelet's file source decodes static pods without strict field
		// checks, so an unknown field is dropped. The MCO's on-prem pods
		// (manifests/on-prem/keepalived.yaml, coredns.yaml) write `empty-dir: {}`, a volume
		// with no source, which the API defaults (SetDefaults_Volume) make an emptyDir.
		var pod corev1.Pod
		if err := yaml.Unmarshal(b, &pod); err != nil {
			return nil, fmt.Errorf("rehearsal: %s/%s: %w", PodManifestDir, n, err)
		}
		vols := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			switch {
			case v.HostPath != nil:
				vols[v.Name] = v.HostPath.Path
			case v.EmptyDir != nil || v.VolumeSource == (corev1.VolumeSource{}):
				vols[v.Name] = EmptyDirPath(pod.Name, v.Name)
			default:
				return nil, fmt.Errorf("rehearsal: %s/%s: volume %s is neither a hostPath nor an emptyDir", PodManifestDir, n, v.Name)
			}
		}
		for _, c := range pod.Spec.Containers {
			if len(c.Command) == 0 {
				// The image's entrypoint runs (the MCO's coredns container: args only); it is
				// not known here, so the container is one no host program plays.
				out = append(out, Container{File: n, Pod: pod.Name, Name: c.Name, Program: EntrypointProgram, Args: c.Args, Image: c.Image})
				continue
			}
			words := append(append([]string{}, c.Command...), c.Args...)
			prog, args := path.Base(words[0]), words[1:]
			if prog == "hyperkube" && len(args) > 0 {
				prog, args = args[0], args[1:]
			}
			if prog == "kube-apiserver" {
				// OpenShift's kube-apiserver reads --openshift-config; the rehearsal's upstream
				// one gets its flags (openshiftconfig.go).
				if args, err = OpenShiftConfigArgs(args, func(p string) ([]byte, error) {
					return os.ReadFile(filepath.Join(root, nodePathOf(p, c.VolumeMounts, vols)))
				}); err != nil {
					return nil, fmt.Errorf("rehearsal: %s/%s: container %s: %w", PodManifestDir, n, c.Name, err)
				}
			}
			ct := Container{File: n, Pod: pod.Name, Name: c.Name, Program: prog, Args: args, Image: c.Image}
			for _, e := range c.Env {
				v := e.Value
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
					v = pod.Namespace // the downward API (keepalived-monitor's POD_NAMESPACE)
				}
				ct.Env = append(ct.Env, e.Name+"="+v)
			}
			for _, m := range c.VolumeMounts {
				hp, ok := vols[m.Name]
				if !ok {
					return nil, fmt.Errorf("rehearsal: %s/%s: container %s mounts unknown volume %s", PodManifestDir, n, c.Name, m.Name)
				}
				ct.HostPaths = append(ct.HostPaths, hp)
				if hp == m.MountPath {
					continue // same path on the node: nothing to bind
				}
				ct.Binds = append(ct.Binds, [2]string{m.MountPath, hp})
			}
			out = append(out, ct)
		}
	}
	return out, nil
}

// nodePathOf maps path p as a container with mounts sees it to the node path (vols: volume
// name → node path); a path under no mount is the node's own.
func nodePathOf(p string, mounts []corev1.VolumeMount, vols map[string]string) string {
	for _, m := range mounts {
		if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/"); ok && vols[m.Name] != "" {
			return path.Join(vols[m.Name], rel)
		}
	}
	return p
}

// EmptyDirPath is the node path of emptyDir volume vol of pod, where the kubelet keeps it
// (/var/lib/kubelet/pods/<pod>/volumes/kubernetes.io~empty-dir/<vol>; the pod's name stands
// for its UID): the containers of one pod that mount it share it.
func EmptyDirPath(pod, vol string) string {
	return "/var/lib/kubelet/pods/" + pod + "/volumes/kubernetes.io~empty-dir/" + vol
}

// EntrypointProgram is the Program of a container without a command: its image's entrypoint,
// which the rehearsal does not know.
const EntrypointProgram = "(entrypoint)"

// NotRun gives, by program, why the rehearsal runs no host program for a static pod container
// whose program it knows of (PodRunner logs it when the pod starts); docs/rehearsal.md lists
// them. The cluster-policy-controller is OpenShift's (openshift/cluster-policy-controller; its
// modules are not served to this machine): a stand-in would have to play its controllers
// (namespace SCC allocation, pod-security label sync, quota), reading the cluster, and nothing
// in the rehearsal reads what they write before the pivot, since its upstream kube-apiserver
// has no SCC admission (OpenShiftConfigDropped). Skipping it is the smaller, honest choice.
var NotRun = map[string]string{
	"cluster-policy-controller": "OpenShift's cluster-policy-controller has no binary here (its modules are not served) and the rehearsal's upstream kube-apiserver has no SCC admission to use what it writes",
}
