package ignition

import (
	"encoding/json"
	"fmt"

	"github.com/coreos/go-semver/semver"
	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	types35 "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/report"
)

// Spec versions. labbuild writes its own configs (the bootstrap's) at Version, 3.4.0; a node's
// config follows its pool's rendered MachineConfig, whose version is the release's MCO's
// (pkg/controller/common/helpers.go: config/v3_4 at release-4.18, config/v3_5 from
// release-4.20), so a 4.20+ node config is 3.5.0. Spec 3.5.0 adds only storage.luks[].cex to
// 3.4.0 (ignition v2.24.0 config/v3_5/types/schema.go), which no MachineConfig sets; the
// package keeps its configs in the 3.4 types and reads and validates a 3.5.0 config with the 3.5
// ones (parse35), refusing a cex it could not carry.
const Version35 = "3.5.0"

// parse is parse34, or parse35 for a config that declares 3.5.0 (its version is read from the
// 3.4 decoding, so a 3.4.0 config is decoded once).
func parse(raw []byte) (types.Config, report.Report, error) {
	cfg, rpt, err := parse34(raw)
	if err == ignerrors.ErrUnknownVersion && declares35(raw) {
		return parse35(raw)
	}
	return cfg, rpt, err
}

// declares35 reports whether raw's ignition.version is 3.5.0.
func declares35(raw []byte) bool {
	var stub struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if json.Unmarshal(raw, &stub) != nil {
		return false
	}
	v, err := semver.NewVersion(stub.Ignition.Version)
	return err == nil && *v == types35.MaxVersion
}

// parse35 is github.com/coreos/ignition/v2/config/v3_5.Parse (v2.24.0, config/v3_5/config.go)
// as parse34 is v3_4's — decode, require 3.5.0, ValidateWithContext with the 3.5 types — and
// then carries the config over to the 3.4 types (down35), keeping version 3.5.0.
func parse35(raw []byte) (types.Config, report.Report, error) {
	var cfg types35.Config
	if rpt, err := util.HandleParseErrors(raw, &cfg); err != nil {
		return types.Config{}, rpt, err
	}
	if v, err := semver.NewVersion(cfg.Ignition.Version); err != nil || *v != types35.MaxVersion {
		return types.Config{}, report.Report{}, ignerrors.ErrUnknownVersion
	}
	rpt := validate.ValidateWithContext(cfg, raw)
	if rpt.IsFatal() {
		return types.Config{}, rpt, ignerrors.ErrInvalid
	}
	out, err := down35(cfg)
	if err != nil {
		return types.Config{}, rpt, err
	}
	return out, rpt, nil
}

// down35 converts a 3.5 config to the 3.4 types with its version kept; a luks cex (3.5's only
// addition) is an error rather than a silent drop.
func down35(cfg types35.Config) (types.Config, error) {
	for _, l := range cfg.Storage.Luks {
		if l.Cex.Enabled != nil {
			return types.Config{}, fmt.Errorf("ignition: storage.luks %q sets cex (spec 3.5.0), which labbuild does not carry", l.Name)
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return types.Config{}, err
	}
	var out types.Config
	if err := json.Unmarshal(b, &out); err != nil {
		return types.Config{}, err
	}
	return out, nil
}

// validateAt validates cfg (3.4 types) at its declared version: 3.4.0 with the 3.4 rules, 3.5.0
// with the 3.5 ones on its encoding (the only other version the package holds).
func validateAt(cfg types.Config, raw []byte) error {
	if cfg.Ignition.Version == Version35 {
		return Validate(raw)
	}
	if v, err := semver.NewVersion(cfg.Ignition.Version); err == nil && *v == types.MaxVersion &&
		len(validate.ValidateWithContext(cfg, nil).Entries) == 0 {
		return nil
	}
	return Validate(raw)
}
