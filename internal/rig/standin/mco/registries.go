package main

// The registries part of the MCO bootstrap render: 99-<pool>-generated-registries, as
// machine-config-operator release-4.18 pkg/controller/container-runtime-config writes it at
// bootstrap (RunImageBootstrap → registriesConfigIgnition → updateRegistriesConfig). The
// registries.conf edit and its TOML encoding are the real code the MCO vendors at 4.18, not a
// copy: github.com/openshift/runtime-utils pkg/registries EditRegistriesConfig (same pseudo
// version), containers/image/v5 v5.29.4 sysregistriesv2.V2RegistriesConf and BurntSushi/toml
// v1.4.0's encoder. What is the stand-in's own is the glue around them, each step naming the
// function it follows.

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	"github.com/BurntSushi/toml"
	"github.com/containers/image/v5/pkg/sysregistriesv2"
	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	"github.com/openshift/runtime-utils/pkg/registries"

	"github.com/labbuild/labbuild/render/ignition"
)

// Node paths of the container runtime's configuration (helpers.go registriesConfigPath,
// storageConfigPath, policyConfigPath).
const (
	registriesConfigPath = "/etc/containers/registries.conf"
	storageConfigPath    = "/etc/containers/storage.conf"
	policyConfigPath     = "/etc/containers/policy.json"
)

// imageInputs are the image-related bootstrap inputs (pkg/controller/bootstrap Run: icspRules,
// idmsRules, itmsRules, imgCfg).
type imageInputs struct {
	icsp []*operatorv1alpha1.ImageContentSourcePolicy
	idms []*configv1.ImageDigestMirrorSet
	itms []*configv1.ImageTagMirrorSet
	img  *configv1.Image
	// policies counts ClusterImagePolicy and ImagePolicy objects (config v1alpha1), which the
	// stand-in does not render.
	policies int
}

// The scope checks of helpers.go (sourceRegex, mirrorRegex), verbatim.
var (
	sourceRegex = regexp.MustCompile(`^\*(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+$|^((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?)(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$`)
	mirrorRegex = regexp.MustCompile(`^((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?)(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$`)
)

// runImageBootstrap returns one 99-<pool>-generated-registries MachineConfig per pool
// (container_runtime_config_controller.go RunImageBootstrap; getManagedKeyReg with no client is
// "99-<pool>-generated-registries"). Its Ignition config is empty unless a mirror set (or an
// Image's insecure/blocked registries) edits registries.conf, as the real one. generated are
// the template MachineConfigs, from which each role's original registries.conf comes.
func runImageBootstrap(b behaviour, in imageInputs, pools []*mcfgv1.MachineConfigPool, generated []*mcfgv1.MachineConfig) ([]*mcfgv1.MachineConfig, error) {
	if in.policies > 0 {
		return nil, errors.New("stand-in: ClusterImagePolicy/ImagePolicy in --manifest-dir: the stand-in does not render policy.json or sigstore configuration")
	}
	var insecure, blocked []string
	if in.img != nil {
		rs := in.img.Spec.RegistrySources
		if len(rs.BlockedRegistries) > 0 || len(rs.AllowedRegistries) > 0 || len(rs.InsecureRegistries) > 0 || len(rs.ContainerRuntimeSearchRegistries) > 0 {
			// getValidBlockedAndAllowedRegistries, policy.json and the search drop-in: not here.
			return nil, fmt.Errorf("stand-in: Image %s spec.registrySources is set: the stand-in renders only mirror sets into registries.conf", in.img.Name)
		}
	}
	var out []*mcfgv1.MachineConfig
	for _, pool := range pools {
		role := pool.Name
		cfg := newIgnConfig(b) // ctrlcommon.NewIgnConfig: the spec version, nothing else
		if len(in.icsp) != 0 || len(in.idms) != 0 || len(in.itms) != 0 {
			orig, err := originalRegistriesConf(b, generated, role)
			if err != nil {
				return nil, err
			}
			conf, err := updateRegistriesConfig(orig, insecure, blocked, in.icsp, in.idms, in.itms)
			if err != nil {
				return nil, fmt.Errorf("could not update registries config with new changes: %w", err)
			}
			cfg.Storage.Files = append(cfg.Storage.Files, ignFileBytesOverwriting(registriesConfigPath, conf))
		}
		// ctrlcommon.MachineConfigFromIgnConfig marshals with github.com/clarketm/json, which
		// leaves out empty structs ({"ignition":{"version":"3.4.0"}} for an empty config); no
		// generated-by-controller-version annotation (RunImageBootstrap), and no OSImageURL.
		mc, err := machineConfigFromIgn(b, role, "99-"+role+"-generated-registries", cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, mc)
	}
	return out, nil
}

// originalRegistriesConf is the role's registries.conf as the templates render it
// (generateOriginalContainerRuntimeConfigs: the first template MachineConfig of the role with
// that file; like the real one it also requires storage.conf and policy.json to be rendered).
func originalRegistriesConf(b behaviour, generated []*mcfgv1.MachineConfig, role string) ([]byte, error) {
	found := map[string][]byte{}
	for _, mc := range generated {
		if mc.Labels["machineconfiguration.openshift.io/role"] != role {
			continue
		}
		cfg, err := parseIgn(b, mc.Spec.Config.Raw)
		if err != nil {
			return nil, fmt.Errorf("parsing Registries Ignition config failed with error: %w", err)
		}
		for _, f := range cfg.Storage.Files {
			switch f.Path {
			case registriesConfigPath, storageConfigPath, policyConfigPath:
				if _, ok := found[f.Path]; ok {
					continue
				}
				var data []byte
				var err error
				if f.Contents.Source != nil {
					data, err = ignition.DecodeSource(*f.Contents.Source, f.Contents.Compression)
				}
				if err != nil {
					return nil, fmt.Errorf("could not decode original registries config: %w", err)
				}
				found[f.Path] = data
			}
		}
	}
	for _, p := range []string{storageConfigPath, registriesConfigPath, policyConfigPath} {
		if _, ok := found[p]; !ok {
			return nil, fmt.Errorf("could not generate original ContainerRuntime Configs: could not find %s in the %s templates", p, role)
		}
	}
	if len(found[registriesConfigPath]) == 0 {
		return nil, errors.New("original registries config is empty")
	}
	return found[registriesConfigPath], nil
}

// updateRegistriesConfig is helpers.go updateRegistriesConfig: decode the original
// registries.conf into sysregistriesv2.V2RegistriesConf, check the scopes
// (validateRegistriesConfScopes), apply runtime-utils' EditRegistriesConfig, encode with
// BurntSushi/toml.
func updateRegistriesConfig(data []byte, insecure, blocked []string, icsp []*operatorv1alpha1.ImageContentSourcePolicy,
	idms []*configv1.ImageDigestMirrorSet, itms []*configv1.ImageTagMirrorSet) ([]byte, error) {
	conf := sysregistriesv2.V2RegistriesConf{}
	if _, err := toml.Decode(string(data), &conf); err != nil {
		return nil, fmt.Errorf("error unmarshalling registries config: %w", err)
	}
	if err := validateRegistriesConfScopes(insecure, blocked, icsp, idms, itms); err != nil {
		return nil, err
	}
	if err := registries.EditRegistriesConfig(&conf, insecure, blocked, icsp, idms, itms); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(conf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// validateRegistriesConfScopes is helpers.go validateRegistriesConfScopes for the mirror sets
// (insecure and blocked scopes come only from an Image, which the stand-in refuses above): a
// source and each mirror must be a valid scope, one mirrorSourcePolicy per source, and a
// NeverContactSource source must not be its own mirror. The errors are the real ones.
func validateRegistriesConfScopes(insecure, blocked []string, icsp []*operatorv1alpha1.ImageContentSourcePolicy,
	idms []*configv1.ImageDigestMirrorSet, itms []*configv1.ImageTagMirrorSet) error {
	for _, s := range insecure {
		if !registries.IsValidRegistriesConfScope(s) {
			return fmt.Errorf("invalid entry for insecure registries %q", s)
		}
	}
	for _, s := range blocked {
		if !registries.IsValidRegistriesConfScope(s) {
			return fmt.Errorf("invalid entry for blocked registries %q", s)
		}
	}
	policy := map[string]configv1.MirrorSourcePolicy{}
	check := func(source string, mirrors []configv1.ImageMirror, p configv1.MirrorSourcePolicy) error {
		if !sourceRegex.MatchString(source) {
			return fmt.Errorf("invalid format for source %q", source)
		}
		if p == "" {
			p = configv1.AllowContactingSource
		}
		if old, ok := policy[source]; ok && old != p {
			return fmt.Errorf("conflicting mirrorSourcePolicy is set for the same source %q in imagedigestmirrorsets, imagetagmirrorsets, or imagecontentsourcepolicies", source)
		} else if !ok {
			policy[source] = p
		}
		for _, m := range mirrors {
			if !mirrorRegex.MatchString(string(m)) {
				return fmt.Errorf("invalid format for mirror %q", m)
			}
			if p == configv1.NeverContactSource && string(m) == source {
				return fmt.Errorf("cannot set mirrorSourcePolicy: NeverContactSource if the source %q is one of the mirrors", source)
			}
		}
		return nil
	}
	for _, r := range icsp { // convertICSPToIDMS: no policy
		for _, m := range r.Spec.RepositoryDigestMirrors {
			var ms []configv1.ImageMirror
			for _, x := range m.Mirrors {
				ms = append(ms, configv1.ImageMirror(x))
			}
			if err := check(m.Source, ms, ""); err != nil {
				return err
			}
		}
	}
	for _, r := range idms {
		for _, m := range r.Spec.ImageDigestMirrors {
			if err := check(m.Source, m.Mirrors, m.MirrorSourcePolicy); err != nil {
				return err
			}
		}
	}
	for _, r := range itms {
		for _, m := range r.Spec.ImageTagMirrors {
			if err := check(m.Source, m.Mirrors, m.MirrorSourcePolicy); err != nil {
				return err
			}
		}
	}
	return nil
}
