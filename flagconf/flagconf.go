// Package flagconf gives every command-line flag two more sources: an
// environment variable GATEWAY_<FLAG> (upper case, dashes as underscores)
// and a key of the YAML file named by --config. A flag given on the command
// line wins over the environment, which wins over the file, which wins over
// the default.
//
// YAML keys are the flag names; nested maps join their keys with dashes, so
// {raw: {retention: 7d}} sets --raw-retention, lists become comma separated
// values, and a list of maps (such as the tiers of a pyramid) becomes its
// maps as comma lists of key=value, separated by semicolons.
package flagconf

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// EnvName is the environment variable that sets flag name.
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse parses args into fs, then fills every flag not given on the command
// line from the environment (lookupEnv, usually os.LookupEnv) and from the
// YAML file named by the flag configFlag, if fs has it and it is set.
func Parse(fs *flag.FlagSet, args []string, envPrefix, configFlag string, lookupEnv func(string) (string, bool)) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var fileValues map[string]string
	if configFlag != "" {
		// The config file's own path may come from the environment too.
		if !set[configFlag] {
			if v, ok := lookupEnv(EnvName(envPrefix, configFlag)); ok && v != "" {
				if err := fs.Set(configFlag, v); err != nil {
					return fmt.Errorf("%s: %w", EnvName(envPrefix, configFlag), err)
				}
				set[configFlag] = true
			}
		}
		if f := fs.Lookup(configFlag); f != nil && f.Value.String() != "" {
			path := f.Value.String()
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("config file: %w", err)
			}
			fileValues, err = flatten(data)
			if err != nil {
				return fmt.Errorf("config file %s: %w", path, err)
			}
			var unknown []string
			for k := range fileValues {
				if fs.Lookup(k) == nil || k == configFlag {
					unknown = append(unknown, k)
				}
			}
			if len(unknown) > 0 {
				sort.Strings(unknown)
				return fmt.Errorf("config file %s: unknown keys %s (keys are flag names; see gateway serve -help)", path, strings.Join(unknown, ", "))
			}
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v, ok := lookupEnv(EnvName(envPrefix, f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", EnvName(envPrefix, f.Name), v, err))
			}
			return
		}
		if v, ok := fileValues[f.Name]; ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("config key %s=%q: %w", f.Name, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// flatten turns a YAML document into flag name -> value.
func flatten(data []byte) (map[string]string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(prefix string, v any) error
	walk = func(prefix string, v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				name := k
				if prefix != "" {
					name = prefix + "-" + k
				}
				if err := walk(name, sub); err != nil {
					return err
				}
			}
		case []any:
			parts := make([]string, len(x))
			sep := ","
			for i, e := range x {
				if m, ok := e.(map[string]any); ok {
					kv, err := keyValues(m)
					if err != nil {
						return fmt.Errorf("%s[%d]: %w", prefix, i, err)
					}
					parts[i], sep = kv, ";"
					continue
				}
				s, err := scalar(e)
				if err != nil {
					return fmt.Errorf("%s: %w", prefix, err)
				}
				parts[i] = s
			}
			out[prefix] = strings.Join(parts, sep)
		default:
			s, err := scalar(x)
			if err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
			out[prefix] = s
		}
		return nil
	}
	return out, walk("", doc)
}

// keyValues writes a map of scalars as key=value pairs, comma separated,
// name first and the rest sorted, so that the text is stable.
func keyValues(m map[string]any) (string, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "name" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if _, ok := m["name"]; ok {
		keys = append([]string{"name"}, keys...)
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		v, err := scalar(m[k])
		if err != nil {
			return "", fmt.Errorf("%s: %w", k, err)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, ","), nil
}

func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("unsupported value %v", v)
	}
}
