package kube

// The typed objects labbuild reads, as small structs with the JSON shape of k8s.io/api's
// core/v1 types (the fields labbuild reads, nothing else): decoding into them needs no
// scheme, and their field paths are the same, so `n.Status.Conditions` reads as it would with
// corev1.Node. List and Get decode into any such struct (or, in tests, into k8s.io/api types).

// ObjectMeta is the part of metadata labbuild reads.
type ObjectMeta struct {
	Name            string            `json:"name,omitempty"`
	Namespace       string            `json:"namespace,omitempty"`
	UID             string            `json:"uid,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	// CreationTimestamp is the server's creation time, RFC 3339 in UTC with seconds
	// (meta/v1 Time), "" when absent.
	CreationTimestamp string `json:"creationTimestamp,omitempty"`
}

// StatusCondition is a status condition of a Node or Pod (type, "True"/"False"/"Unknown").
type StatusCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Node is a core/v1 Node.
type Node struct {
	ObjectMeta `json:"metadata"`
	Spec       struct {
		Unschedulable bool `json:"unschedulable,omitempty"`
	} `json:"spec"`
	Status struct {
		Conditions []StatusCondition `json:"conditions,omitempty"`
	} `json:"status"`
}

// Pod is a core/v1 Pod.
type Pod struct {
	ObjectMeta `json:"metadata"`
	Spec       struct {
		NodeName string `json:"nodeName,omitempty"`
	} `json:"spec"`
	Status struct {
		// Phase is "Pending", "Running", "Succeeded", "Failed" or "Unknown".
		Phase      string            `json:"phase,omitempty"`
		Conditions []StatusCondition `json:"conditions,omitempty"`
	} `json:"status"`
}

// ConfigMap is a core/v1 ConfigMap.
type ConfigMap struct {
	ObjectMeta `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
}
