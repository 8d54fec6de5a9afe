package main

import (
	"encoding/json"
	"fmt"

	cjson "github.com/clarketm/json"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	"sigs.k8s.io/yaml"
)

// The stand-in keeps every Ignition config in the v3_5 types (3.5 is a superset of 3.4 whose
// additions are all omitempty), and writes the spec version of the release it plays, so a 4.18
// config marshals to the bytes the 4.18 MCO's v3_4 types give.

// newIgnConfig is ctrlcommon.NewIgnConfig: an empty config of the release's spec version.
func newIgnConfig(b behaviour) types.Config {
	return types.Config{Ignition: types.Ignition{Version: b.ignitionVersion}}
}

// marshalIgn encodes cfg as the MCO does everywhere it stores a config in a MachineConfig
// (ctrlcommon.MachineConfigFromIgnConfig, MergeMachineConfigs, the kubelet and registries
// generators): github.com/clarketm/json, whose omitempty also drops empty structs, so an empty
// config is {"ignition":{"version":"3.4.0"}} and a file without an owner has no "user".
// A config that had no version (a template directory that rendered nothing) keeps none, as in
// the real transpile.
func marshalIgn(b behaviour, cfg types.Config) ([]byte, error) {
	if cfg.Ignition.Version != "" {
		cfg.Ignition.Version = b.ignitionVersion
	}
	return cjson.Marshal(cfg)
}

// marshalObject is the YAML the MCO's serializers write for an API object (the controller's
// json.NewYAMLSerializer, the operator's toYAML, both encoding/json then JSON-to-YAML with
// sorted keys). Objects are encoded with this module's apimachinery (v0.31, the 4.18 one),
// which writes a zero metadata.creationTimestamp as null; releases whose apimachinery leaves it
// out (4.22: v0.35) get it removed from every object metadata.
func marshalObject(b behaviour, obj any) ([]byte, error) {
	if !b.omitCreationTimestamp {
		return yaml.Marshal(obj)
	}
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return nil, err
	}
	dropNullCreationTimestamps(v)
	if j, err = json.Marshal(v); err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// dropNullCreationTimestamps removes creationTimestamp: null from every "metadata" map in v.
func dropNullCreationTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if m, ok := c.(map[string]any); ok && k == "metadata" {
				if ts, ok := m["creationTimestamp"]; ok && ts == nil {
					delete(m, "creationTimestamp")
				}
			}
			dropNullCreationTimestamps(c)
		}
	case []any:
		for _, c := range t {
			dropNullCreationTimestamps(c)
		}
	}
}

// writeObject encodes obj with marshalObject into dir/rel.
func writeObject(b behaviour, dir, rel string, obj any) error {
	y, err := marshalObject(b, obj)
	if err != nil {
		return fmt.Errorf("encode %s: %w", rel, err)
	}
	return writeOut(dir, rel, y)
}
