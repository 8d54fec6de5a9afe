package rehearsal

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// TestTrustedCAInjector runs the network operator's trusted-CA injection stand-in against a
// real kube-apiserver with openshift/api's Proxy CRD and the cluster-baremetal-operator's
// cbo-trusted-ca (CBOTrustedCA): without a Proxy nothing happens; with the Proxy naming
// user-ca-bundle the labelled ConfigMap gets the user bundle, then the bundle plus "\n" plus
// the system bundle when one is given (mergeTrustBundlesToConfigMap), an unlabelled one is
// left alone, a second pass changes nothing; a trustedCA that is missing or holds no
// certificate is an error and changes nothing.
func TestTrustedCAInjector(t *testing.T) {
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	k, err := kube.NewClients(kubedyn.Config(cp.Admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api")
	cmd.Dir = repo.Root()
	dir, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	proxyCRD, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "config", "v1", "zz_generated.crd-manifests", "0000_03_config-operator_01_proxies.crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if proxyCRD, _, err = DropCEL131(proxyCRD); err != nil {
		t.Fatal(err)
	}
	ns := func(n string) []byte {
		return []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + n + "\n")
	}
	userPEM, _ := opCA(t, "user")
	user := string(userPEM)
	indent := "    " + strings.ReplaceAll(strings.TrimSpace(user), "\n", "\n    ") + "\n"
	files := map[string][]byte{
		"00-ns-config.yaml": ns("openshift-config"), "00-ns-mapi.yaml": ns(MachineAPINamespace), "00-ns-other.yaml": ns("other"),
		"0000_03_proxies.crd.yaml": proxyCRD,
		CBOTrustedCAFile:           CBOTrustedCA,
		"10-user-ca-bundle.yaml":   []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: user-ca-bundle\n  namespace: openshift-config\ndata:\n  ca-bundle.crt: |\n" + indent),
		"10-not-a-bundle.yaml":     []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-bundle\n  namespace: openshift-config\ndata:\n  ca-bundle.crt: nothing\n"),
		"10-unlabelled.yaml":       []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unlabelled\n  namespace: other\ndata:\n  ca-bundle.crt: keep\n"),
	}
	ap, err := kube.NewApplier(k.Config, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.ApplyFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	get := func(ns, name string) string {
		t.Helper()
		cm, err := k.Dynamic.Resource(kube.ConfigMaps).Namespace(ns).Get(ctx, name, kube.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := dig(cm.Object, "data", TrustedCAKey).(string)
		return s
	}
	in := &TrustedCAInjector{Kube: k}
	if changed, err := in.Inject(ctx); err != nil || len(changed) != 0 {
		t.Errorf("no Proxy: changed %v, %v; want nothing", changed, err)
	}
	proxy := func(trusted string) {
		t.Helper()
		if _, err := ap.ApplyFiles(ctx, map[string][]byte{"proxy.yaml": []byte("apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  trustedCA:\n    name: " + trusted + "\n")}); err != nil {
			t.Fatal(err)
		}
	}
	proxy("user-ca-bundle")
	want := []string{MachineAPINamespace + "/" + CBOTrustedCAName}
	if changed, err := in.Inject(ctx); err != nil || !slices.Equal(changed, want) {
		t.Fatalf("changed %v, %v; want %v", changed, err, want)
	}
	if got := get(MachineAPINamespace, CBOTrustedCAName); got != user {
		t.Errorf("cbo-trusted-ca:\n%s\nwant the user bundle:\n%s", got, user)
	}
	if changed, err := in.Inject(ctx); err != nil || len(changed) != 0 {
		t.Errorf("second pass: changed %v, %v; want nothing", changed, err)
	}
	sysPEM, _ := opCA(t, "system")
	sys := string(sysPEM)
	in.SystemBundle = []byte(sys)
	if changed, err := in.Inject(ctx); err != nil || !slices.Equal(changed, want) {
		t.Errorf("with a system bundle: changed %v, %v", changed, err)
	}
	if got := get(MachineAPINamespace, CBOTrustedCAName); got != user+"\n"+sys {
		t.Errorf("cbo-trusted-ca:\n%s\nwant user + newline + system", got)
	}
	if got := get("other", "unlabelled"); got != "keep" {
		t.Errorf("an unlabelled ConfigMap was changed: %q", got)
	}
	for _, bad := range []struct{ name, want string }{{"absent", "absent"}, {"not-a-bundle", "not-a-bundle"}} {
		proxy(bad.name)
		if changed, err := in.Inject(ctx); err == nil || !strings.Contains(err.Error(), bad.want) || len(changed) != 0 {
			t.Errorf("trustedCA %s: changed %v, %v; want an error naming it and nothing changed", bad.name, changed, err)
		}
	}
	if got := get(MachineAPINamespace, CBOTrustedCAName); got != user+"\n"+sys {
		t.Errorf("a bad trustedCA changed cbo-trusted-ca")
	}
}
