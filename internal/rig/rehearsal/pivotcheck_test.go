package rehearsal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/websocket"

	"github.com/labbuild/labbuild/targets/kube"
)

// What issue 24 requires after cluster/done, through the API VIP with the admin kubeconfig: a
// kubelet that joined before the pivot serves logs and exec through the post-pivot
// kube-apiserver; a ServiceAccount token issued before the pivot is accepted after it; and
// system:kube-apiserver may use nodes/proxy.

var serviceAccounts = kube.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

// saTokenBefore asks the API for a token of ServiceAccount default/default (TokenRequest),
// retrying until one is issued or ctx ends.
func saTokenBefore(ctx context.Context, clients func() (*kube.Clients, error)) (string, error) {
	var last error
	for ctx.Err() == nil {
		k, err := clients()
		if err == nil {
			// The name is the ServiceAccount's: POST .../serviceaccounts/default/token.
			tr := &kube.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
				"metadata": map[string]any{"name": "default", "namespace": "default"},
				"spec":     map[string]any{"expirationSeconds": int64(3600)}}}
			var out *kube.Unstructured
			out, err = k.Dynamic.Resource(serviceAccounts).Namespace("default").Create(ctx, tr, kube.CreateOptions{}, "token")
			if err == nil {
				tok, _, _ := kube.NestedString(out.Object, "status", "token")
				if tok != "" {
					return tok, nil
				}
				err = fmt.Errorf("TokenRequest answered without a token")
			}
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	return "", fmt.Errorf("no ServiceAccount token: %v (%w)", last, ctx.Err())
}

// tokenUser is who the API says a bearer token is (SelfSubjectReview), through k's server.
func tokenUser(ctx context.Context, k *kube.Clients, token string) (string, error) {
	cfg := *k.Config
	cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, token
	tc, err := kube.NewClients(&cfg)
	if err != nil {
		return "", err
	}
	ssr := &kube.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}}
	out, err := tc.Dynamic.Resource(kube.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}).Create(ctx, ssr, kube.CreateOptions{})
	if err != nil {
		return "", err
	}
	u, _, _ := kube.NestedString(out.Object, "status", "userInfo", "username")
	return u, nil
}

// canI is `oc auth can-i <verb> <resource>/<sub> --as user` (a SubjectAccessReview).
func canI(ctx context.Context, k *kube.Clients, user, verb, resource, sub string) (bool, string, error) {
	sar := &kube.Unstructured{Object: map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{"user": user, "resourceAttributes": map[string]any{"verb": verb, "resource": resource, "subresource": sub}}}}
	out, err := k.Dynamic.Resource(kube.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}).Create(ctx, sar, kube.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	ok, _, _ := kube.NestedBool(out.Object, "status", "allowed")
	why, _, _ := kube.NestedString(out.Object, "status", "reason")
	return ok, why, nil
}

// podLogs is `oc logs -n ns pod -c container` through k's server (the kube-apiserver asks the
// pod's kubelet, verifying its serving certificate with --kubelet-certificate-authority).
func podLogs(ctx context.Context, k *kube.Clients, ns, pod, container string) (string, error) {
	b, err := k.REST.Do(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods/"+pod+"/log", url.Values{"container": {container}, "tailLines": {"20"}}, "", nil)
	return string(b), err
}

// podExec is `oc exec -n ns pod -c container -- argv...` through k's server over the
// v4.channel.k8s.io WebSocket protocol: it returns what the command wrote to stdout and
// stderr, and the error channel's status when the command failed.
func podExec(ctx context.Context, k *kube.Clients, ns, pod, container string, argv ...string) (stdout, stderr string, err error) {
	base, err := url.Parse(k.Config.Host)
	if err != nil {
		return "", "", err
	}
	q := url.Values{"container": {container}, "stdout": {"true"}, "stderr": {"true"}, "command": argv}
	loc := &url.URL{Scheme: "wss", Host: base.Host, Path: "/api/v1/namespaces/" + ns + "/pods/" + pod + "/exec", RawQuery: q.Encode()}
	cfg, err := websocket.NewConfig(loc.String(), "https://"+base.Host)
	if err != nil {
		return "", "", err
	}
	cfg.Protocol = []string{"v4.channel.k8s.io"}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.Config.CAData)
	tc := &tls.Config{RootCAs: pool, ServerName: k.Config.ServerName, MinVersion: tls.VersionTLS12}
	if tc.ServerName == "" {
		tc.ServerName = base.Hostname()
	}
	crt, err := tls.X509KeyPair(k.Config.CertData, k.Config.KeyData)
	if err != nil {
		return "", "", err
	}
	tc.Certificates = []tls.Certificate{crt}
	dial := k.Config.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	raw, err := dial(ctx, "tcp", base.Host)
	if err != nil {
		return "", "", err
	}
	tconn := tls.Client(raw, tc)
	if err := tconn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return "", "", err
	}
	ws, err := websocket.NewClient(cfg, tconn)
	if err != nil {
		tconn.Close()
		return "", "", fmt.Errorf("exec upgrade: %w", err)
	}
	defer ws.Close()
	ws.SetDeadline(time.Now().Add(30 * time.Second))
	var out, errOut strings.Builder
	for {
		var frame []byte
		if err := websocket.Message.Receive(ws, &frame); err != nil {
			break // the server closes the stream when the command exits
		}
		if len(frame) == 0 {
			continue
		}
		switch frame[0] {
		case 1:
			out.Write(frame[1:])
		case 2:
			errOut.Write(frame[1:])
		case 3:
			var st struct{ Status, Message string }
			if json.Unmarshal(frame[1:], &st) == nil && st.Status != "" && st.Status != "Success" {
				return out.String(), errOut.String(), fmt.Errorf("exec: %s", st.Message)
			}
		}
	}
	return out.String(), errOut.String(), nil
}
