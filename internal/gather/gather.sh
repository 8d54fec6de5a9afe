#!/bin/sh
# labbuild gather's collector, run on one node as root (sudo) over SSH: what openshift-install's
# installer-gather.sh (on the bootstrap) and installer-masters-gather.sh (on each master)
# collect, written as one tar stream to standard output. Every step is best-effort: a missing
# tool or file leaves its part empty and is noted in gather.log, never stops the rest.
# $1 is the node's role (bootstrap, master, worker).
set -u
role=${1:-node}
D=$(mktemp -d /tmp/labbuild-gather.XXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
cd "$D" || exit 1
mkdir -p journals network containers rendered-assets etcd
note() { echo "$*" >> gather.log; }
have() { command -v "$1" >/dev/null 2>&1; }
echo "$role" > role.txt

# Journals of the units bootkube and the kubelet run in (installer-gather.sh's list).
if have journalctl; then
  for s in release-image crio-configure bootkube kubelet crio approve-csr machine-config-daemon-firstboot; do
    journalctl --boot --no-pager --output=short --unit="$s" > "journals/$s.log" 2>&1
  done
  journalctl --boot --no-pager --output=short -p warning > journals/warnings.log 2>&1
else
  note "no journalctl: no journals"
fi

# Network facts.
ip addr > network/ip-addr.txt 2>&1
ip route > network/ip-route.txt 2>&1
ip -6 route > network/ip6-route.txt 2>&1
hostname > network/hostname.txt 2>&1
cp /etc/resolv.conf /etc/hosts network/ 2>/dev/null
if have ss; then ss -tulpn > network/listening.txt 2>&1; fi
if have nmcli; then nmcli -t device show > network/nmcli-device.txt 2>&1; fi
cp -r /etc/NetworkManager/system-connections network/ 2>/dev/null

# Containers: every CRI container's log and inspect (the static pods' among them).
if have crictl; then
  crictl ps -a > containers/crictl-ps.txt 2>&1
  crictl pods > containers/crictl-pods.txt 2>&1
  for c in $(crictl ps -a -q 2>/dev/null); do
    n=$(crictl inspect -o go-template --template '{{.status.metadata.name}}' "$c" 2>/dev/null)
    crictl logs "$c" > "containers/${n:-container}-$c.log" 2>&1
    crictl inspect "$c" > "containers/${n:-container}-$c.inspect" 2>&1
  done
else
  note "no crictl: container logs only from /var/log"
fi
cp -r /var/log/bootstrap-control-plane containers/ 2>/dev/null

# Rendered assets (bootkube's /opt/openshift) and the static pods' manifests, less their
# secrets, as installer-gather.sh removes them (labbuild checks again what arrives).
for d in /var/opt/openshift /opt/openshift; do
  if [ -d "$d" ]; then cp -r "$d" rendered-assets/ 2>/dev/null; break; fi
done
cp -r /etc/kubernetes/manifests rendered-assets/static-pod-manifests 2>/dev/null
find rendered-assets \( -name '*secret*' -o -name '*kubeconfig*' -o -name '*.key' -o -name '.kube' \
  -o -name 'auth' -o -name '*.ign' -o -name 'config.json' -o -name '*password*' \) -prune -exec rm -rf {} + 2>/dev/null

# etcd's member list: through the etcdctl container of the etcd pod (a master), else a host
# etcdctl with the client certificate the node carries (bootstrap: bootstrap-secrets).
etcd_done=
if have crictl; then
  c=$(crictl ps --name '^etcdctl$' -q 2>/dev/null | head -n1)
  if [ -n "$c" ]; then
    crictl exec "$c" etcdctl member list -w table > etcd/member-list.txt 2>&1 && etcd_done=1
    crictl exec "$c" etcdctl endpoint status --cluster -w table > etcd/endpoint-status.txt 2>&1
  fi
fi
if [ -z "$etcd_done" ] && have etcdctl; then
  for set in "/etc/kubernetes/bootstrap-secrets/etcd-ca.crt /etc/kubernetes/bootstrap-secrets/etcd-client.crt /etc/kubernetes/bootstrap-secrets/etcd-client.key" \
             "/etc/kubernetes/static-pod-certs/configmaps/etcd-all-bundles/server-ca-bundle.crt /etc/kubernetes/static-pod-certs/secrets/etcd-all-certs/etcd-client.crt /etc/kubernetes/static-pod-certs/secrets/etcd-all-certs/etcd-client.key"; do
    set -- $set
    [ -f "$1" ] && [ -f "$2" ] && [ -f "$3" ] || continue
    ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 --cacert="$1" --cert="$2" --key="$3" \
      --command-timeout=10s member list -w table > etcd/member-list.txt 2>&1 && etcd_done=1 && break
  done
fi
[ -n "$etcd_done" ] || note "etcd member list: no etcdctl container and no etcdctl with a client certificate here"

# The whole stream: this directory, then /var/log (symbolic links followed: /var/log/containers
# points into /var/log/pods), less the binary journal taken above.
tar -ch --exclude=var/log/journal -f - -C "$D" . -C / var/log 2>/dev/null
