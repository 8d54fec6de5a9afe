package targets

// Shared by the pki, kubeconfig and manifests families: which CAs sign what a client meets
// on the API.

// pkiServingSigners are the CAs whose serving certificates a client meets on the API after
// the pivot, besides the bootstrap's kubernetes CA: every kubeconfig's bundle holds all four
// (the installer's kube-apiserver-complete-server-ca-bundle plus the bootstrap CA).
var pkiServingSigners = []string{"lb-signer", "localhost-signer", "service-network-signer"}
