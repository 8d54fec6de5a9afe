package main

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	configv1 "github.com/openshift/api/config/v1"
)

// The bootstrap node's on-prem static pods, as the real MCO 4.18 bootstrap writes them
// (pkg/operator/bootstrap.go RenderBootstrap → appendManifestsByPlatform →
// getPlatformManifests, rendering manifests/on-prem/ with pkg/operator/render.go): for platform
// BareMetal, <dest>/baremetal/manifests/{coredns,keepalived}.yaml and
// <dest>/baremetal/static-pod-resources/{coredns/Corefile.tmpl,keepalived/keepalived.conf.tmpl},
// which bootkube.sh's copy_static_resources_for places under /etc/kubernetes/manifests and
// /etc/kubernetes/static-pod-resources. keepalived is left out when the load balancer is not
// OpenShiftManagedDefault (UserManaged: the user balances the API, coredns still runs).
//
// The text below is the stand-in's own (the real MCO embeds the templates in its binary);
// TestBootstrapOnPremMatchesMCO renders the real manifests/on-prem templates
// (../shared/fixtures/mco/on-prem) for the same inputs and requires every file byte for byte.
// Its delimiters are « », because the outputs hold runtimecfg's own {{ }} templates and bash's
// [[ ]].

// onPremBootstrapData is what the on-prem manifests read: the namespace word
// (onPremPlatformShortName), the VIPs joined by commas (the --api-vips/--ingress-vips
// arguments) and the first of each (the Corefile's answers), the DNS base domain and the
// *Bootstrap images (RenderConfigImages).
type onPremBootstrapData struct {
	Short, BaseDomain                              string
	APIVIPs, IngressVIPs, APIVIP, IngressVIP       string
	KeepalivedImage, CorednsImage, RuntimeCfgImage string
}

// onPremBootstrapFiles returns the platform's bootstrap files by --dest-dir path, or nothing
// when the platform has none (platform None, and the cloud platforms labbuild never renders).
func onPremBootstrapFiles(infra *configv1.Infrastructure, dns *configv1.DNS, images map[string]string) (map[string][]byte, error) {
	ps := infra.Status.PlatformStatus
	if ps == nil || ps.BareMetal == nil {
		return nil, nil
	}
	lbType := configv1.LoadBalancerTypeOpenShiftManagedDefault
	if ps.BareMetal.LoadBalancer != nil {
		lbType = ps.BareMetal.LoadBalancer.Type
	}
	d := onPremBootstrapData{Short: "kni", BaseDomain: dns.Spec.BaseDomain,
		APIVIPs: strings.Join(ps.BareMetal.APIServerInternalIPs, ","), IngressVIPs: strings.Join(ps.BareMetal.IngressIPs, ","),
		KeepalivedImage: images["keepalived-ipfailover"], CorednsImage: images["coredns"], RuntimeCfgImage: images["baremetal-runtimecfg"]}
	if ps.Type != configv1.BareMetalPlatformType {
		d.Short = "" // onPremPlatformShortName of a type it does not know
	}
	if len(ps.BareMetal.APIServerInternalIPs) > 0 {
		d.APIVIP = ps.BareMetal.APIServerInternalIPs[0]
	}
	if len(ps.BareMetal.IngressIPs) > 0 {
		d.IngressVIP = ps.BareMetal.IngressIPs[0]
	}
	const platform = "baremetal"
	files := []struct{ path, tmpl string }{
		{platform + "/manifests/coredns.yaml", bootstrapCorednsPod},
		{platform + "/static-pod-resources/coredns/Corefile.tmpl", bootstrapCorefileTmpl},
	}
	if lbType == configv1.LoadBalancerTypeOpenShiftManagedDefault || lbType == "" {
		files = append(files,
			struct{ path, tmpl string }{platform + "/manifests/keepalived.yaml", bootstrapKeepalivedPod},
			struct{ path, tmpl string }{platform + "/static-pod-resources/keepalived/keepalived.conf.tmpl", bootstrapKeepalivedConfTmpl})
	}
	out := map[string][]byte{}
	for _, f := range files {
		t, err := template.New(f.path).Delims("«", "»").Option("missingkey=error").Parse(f.tmpl)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return nil, fmt.Errorf("render %s: %w", f.path, err)
		}
		out[f.path] = b.Bytes()
	}
	return out, nil
}

// bootstrapPodHead is the part MCO manifests/on-prem/coredns.yaml and keepalived.yaml share,
// up to their first two volumes: pod name (also the static-pod-resources folder), its
// namespace, the app label's suffix, and the resource-dir and kubeconfig hostPaths.
func bootstrapPodHead(name, app string) string {
	return `---
kind: Pod
apiVersion: v1
metadata:
  name: ` + name + `
  namespace: openshift-«.Short»-infra
  creationTimestamp:
  deletionGracePeriodSeconds: 65
  labels:
    app: «.Short»-infra-` + app + `
  annotations:
    target.workload.openshift.io/management: '{"effect": "PreferredDuringScheduling"}'
    openshift.io/required-scc: privileged
spec:
  volumes:
  - name: resource-dir
    hostPath:
      path: "/etc/kubernetes/static-pod-resources/` + name + `"
  - name: kubeconfig
    hostPath:
      path: "/etc/kubernetes/kubeconfig"
`
}

// bootstrapCorednsPod is the stand-in's form of MCO manifests/on-prem/coredns.yaml as the real MCO renders it.
var bootstrapCorednsPod = bootstrapPodHead("coredns", "coredns") + `  - name: conf-dir
    empty-dir: {}
  - name: manifests
    hostPath:
      path: "/opt/openshift/manifests"
  - name: nodeip-configuration
    hostPath:
      path: "/run/nodeip-configuration"
  initContainers:
  - name: render-config
    image: «.RuntimeCfgImage»
    command:
    - runtimecfg
    - render
    - "/etc/kubernetes/kubeconfig"
    - "--api-vips"
    - "«.APIVIPs»"
    - "--ingress-vips"
    - "«.IngressVIPs»"
    - "/config"
    - "--out-dir"
    - "/etc/coredns"
    - "--cluster-config"
    - "/opt/openshift/manifests/cluster-config.yaml"
    resources: {}
    volumeMounts:
    - name: kubeconfig
      mountPath: "/etc/kubernetes/kubeconfig"
      mountPropagation: HostToContainer
    - name: resource-dir
      mountPath: "/config"
      mountPropagation: HostToContainer
    - name: conf-dir
      mountPath: "/etc/coredns"
    - name: manifests
      mountPath: "/opt/openshift/manifests"
      mountPropagation: HostToContainer
    - name: nodeip-configuration
      mountPath: "/run/nodeip-configuration"
      mountPropagation: HostToContainer
    imagePullPolicy: IfNotPresent
  containers:
  - name: coredns
    securityContext:
      readOnlyRootFilesystem: false
    image: «.CorednsImage»
    args:
    - "--conf"
    - "/etc/coredns/Corefile"
    resources:
      requests:
        cpu: 100m
        memory: 200Mi
    volumeMounts:
    - name: conf-dir
      mountPath: "/etc/coredns"
    - name: nodeip-configuration
      mountPath: "/run/nodeip-configuration"
      mountPropagation: HostToContainer
    livenessProbe:
      httpGet:
        path: /health
        port: 18080
        scheme: HTTP
      initialDelaySeconds: 60
      timeoutSeconds: 5
      successThreshold: 1
      failureThreshold: 5
    terminationMessagePolicy: FallbackToLogsOnError
  hostNetwork: true
  tolerations:
  - operator: Exists
  priorityClassName: system-node-critical
status: {}
`

// bootstrapCorefileTmpl is the stand-in's form of MCO manifests/on-prem/coredns-corefile.tmpl as the real MCO renders it.
const bootstrapCorefileTmpl = `. {
    errors
    health :18080
    forward . {{- range $upstream := .DNSUpstreams}} {{$upstream}}{{- end}} {
        policy sequential
    }
    cache 30
    reload
    template IN {{ .Cluster.IngressVIPRecordType }} «.BaseDomain» {
        match .*.apps.«.BaseDomain»
        answer "{{"{{ .Name }}"}} 60 in {{"{{ .Type }}"}} «.IngressVIP»"
        fallthrough
    }
    template IN {{ .Cluster.IngressVIPEmptyType }} «.BaseDomain» {
        match .*.apps.«.BaseDomain»
        fallthrough
    }
    template IN {{ .Cluster.APIVIPRecordType }} «.BaseDomain» {
        match ^api.«.BaseDomain»
        answer "{{"{{ .Name }}"}} 60 in {{"{{ .Type }}"}} «.APIVIP»"
        fallthrough
    }
    template IN {{ .Cluster.APIVIPEmptyType }} «.BaseDomain» {
        match ^api.«.BaseDomain»
        fallthrough
    }
    template IN {{ .Cluster.APIVIPRecordType }} «.BaseDomain» {
        match ^api-int.«.BaseDomain»
        answer "{{"{{ .Name }}"}} 60 in {{"{{ .Type }}"}} «.APIVIP»"
        fallthrough
    }
    template IN {{ .Cluster.APIVIPEmptyType }} «.BaseDomain» {
        match ^api-int.«.BaseDomain»
        fallthrough
    }
}
`

// bootstrapKeepalivedPod is the stand-in's form of MCO manifests/on-prem/keepalived.yaml as the real MCO renders it.
var bootstrapKeepalivedPod = bootstrapPodHead("keepalived", "vrrp") + `  - name: conf-dir
    hostPath:
      path: "/etc/keepalived"
  - name: manifests
    hostPath:
      path: "/opt/openshift/manifests"
  - name: run-dir
    empty-dir: {}
  containers:
  - name: keepalived
    securityContext:
      privileged: true
      readOnlyRootFilesystem: false
    image: «.KeepalivedImage»
    env:
      - name: NSS_SDB_USE_CACHE
        value: "no"
    command:
    - /bin/bash
    - -c
    - |
      #/bin/bash
      reload_keepalived()
      {
        if pid=$(pgrep -o keepalived); then
            kill -s SIGHUP "$pid"
        else
            /usr/sbin/keepalived -f /etc/keepalived/keepalived.conf --dont-fork --vrrp --log-detail --log-console &
        fi
      }
      stop_keepalived()
      {
        echo "Keepalived process stopped" >> /var/run/keepalived/stopped
        if pid=$(pgrep -o keepalived); then
            kill -s TERM "$pid"
        fi
      }

      msg_handler()
      {
        while read -r line; do
          echo "The client sent: $line" >&2
          # currently only 'reload' and 'stop' msgs are supported
          if [ "$line" = reload ]; then
              reload_keepalived
          elif  [ "$line" = stop ]; then
              stop_keepalived
          fi
        done
      }
      set -ex
      declare -r keepalived_sock="/var/run/keepalived/keepalived.sock"
      export -f msg_handler
      export -f reload_keepalived
      export -f stop_keepalived

      while [ -s "/var/run/keepalived/stopped" ]; do
         echo "Container stopped"
         sleep 60
      done
      if [ -s "/etc/keepalived/keepalived.conf" ]; then
          /usr/sbin/keepalived -f /etc/keepalived/keepalived.conf --dont-fork --vrrp --log-detail --log-console &
      fi
      rm -f "$keepalived_sock"
      socat UNIX-LISTEN:${keepalived_sock},fork system:'bash -c msg_handler'
    resources:
      requests:
        cpu: 100m
        memory: 200Mi
    volumeMounts:
    - name: conf-dir
      mountPath: "/etc/keepalived"
      mountPropagation: HostToContainer
    - name: run-dir
      mountPath: "/var/run/keepalived"
    livenessProbe:
      exec:
        command:
        - /bin/bash
        - -c
        - |
          [[ -s /etc/keepalived/keepalived.conf ]] || \
          [[ -s /var/run/keepalived/stopped ]] || \
          kill -s SIGUSR1 "$(pgrep -o keepalived)" && ! grep -q "State = FAULT" /tmp/keepalived.data
      initialDelaySeconds: 20
    terminationMessagePolicy: FallbackToLogsOnError
    imagePullPolicy: IfNotPresent
  - name: keepalived-monitor
    image: «.RuntimeCfgImage»
    env:
      - name: ENABLE_UNICAST
        value: "yes"
      - name: IS_BOOTSTRAP
        value: "yes"
      - name: POD_NAMESPACE
        valueFrom:
          fieldRef:
            fieldPath: metadata.namespace
    command:
    - dynkeepalived
    - "/etc/kubernetes/kubeconfig"
    - "/config/keepalived.conf.tmpl"
    - "/etc/keepalived/keepalived.conf"
    - "--api-vips"
    - "«.APIVIPs»"
    - "--ingress-vips"
    - "«.IngressVIPs»"
    - "--cluster-config"
    - "/opt/openshift/manifests/cluster-config.yaml"
    - "--check-interval"
    - "5s"
    resources:
      requests:
        cpu: 100m
        memory: 200Mi
    volumeMounts:
    - name: resource-dir
      mountPath: "/config"
      mountPropagation: HostToContainer
    - name: kubeconfig
      mountPath: "/etc/kubernetes/kubeconfig"
      mountPropagation: HostToContainer
    - name: conf-dir
      mountPath: "/etc/keepalived"
      mountPropagation: HostToContainer
    - name: run-dir
      mountPath: "/var/run/keepalived"
    - name: manifests
      mountPath: "/opt/openshift/manifests"
      mountPropagation: HostToContainer
    imagePullPolicy: IfNotPresent
  hostNetwork: true
  tolerations:
  - operator: Exists
  priorityClassName: system-node-critical
status: {}
`

// bootstrapKeepalivedConfTmpl is the stand-in's form of MCO manifests/on-prem/keepalived.conf.tmpl as the real MCO renders it.
const bootstrapKeepalivedConfTmpl = `# Configuration template for Keepalived, which is used to manage the DNS and
# API VIPs.
#
# For more information, see installer/data/data/bootstrap/baremetal/README.md
# in the installer repo.

{{ range $i, $config := .Configs }}
vrrp_instance {{.Cluster.Name}}_API_{{$i}} {
    state BACKUP
    interface {{.VRRPInterface}}
    virtual_router_id {{.Cluster.APIVirtualRouterID }}
    priority 70
    advert_int 1
    {{ if .EnableUnicast }}
    unicast_src_ip {{.NonVirtualIP}}
    unicast_peer {
        {{range .LBConfig.Backends -}}
        {{.Address}}
        {{end}}
    }
    {{end}}
    authentication {
        auth_type PASS
        auth_pass {{.Cluster.Name}}_api_vip
    }
    virtual_ipaddress {
        {{ .Cluster.APIVIP }}/{{ .Cluster.VIPNetmask }} label vip
    }
}
{{end}}
`
