package testenv

// LabNetworkYAML is the network section of a test lab's lab.yaml, on 198.18.0.0/24 (RFC
// 2544's benchmarking range: not a private range, and the brief's rule is that such a lab
// lives only inside network namespaces the test creates, or sends nothing at all): gateway
// and DNS .1, the API VIP .10, the ingress VIP .11, DHCP .200 to .254. The nodes that go
// with it sit at .100 (bootstrap), .101 on (masters) and .110 on (workers), as the default
// lab's do on 192.168.126.0/24.
const LabNetworkYAML = `network:
  machineNetwork: 198.18.0.0/24
  gateway: 198.18.0.1
  dns: 198.18.0.1
  apiVIP: 198.18.0.10
  ingressVIP: 198.18.0.11
  dhcpStart: 198.18.0.200
  dhcpEnd: 198.18.0.254
`
