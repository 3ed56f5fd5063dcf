// Package configfile reads skiff's configuration file, as k3s reads /etc/rancher/k3s/config.yaml:
// a YAML mapping whose keys are a command's long flag names and whose values are what the flag
// would be given, so a systemd unit never carries a wall of flags. Files in the config.yaml.d
// directory beside it are read after it in name order, a later file's key replacing an
// earlier one's; a key ending in "+" appends to a list flag instead ("node-label+: [rack=a]").
// Flags on the command line win over every file.
//
// Every key must be a flag of the command: a misspelt key is an error naming the file and line,
// never silently ignored.
package configfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Setting is one key of one file: the flag it sets and the values it gives.
type Setting struct {
	Flag   string
	Values []string
	Append bool
	// Where is "file:line", for errors.
	Where string
}

// Files are path and, beside it, path's directory + ".d" entries ending in .yaml or .yml, in
// the order they apply. Only path is required to exist when required is true.
func Files(path string, required bool) ([]string, error) {
	var files []string
	if path == "" { // --config "": no file at all
		return nil, nil
	}
	if _, err := os.Stat(path); err == nil {
		files = append(files, path)
	} else if required || !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("config file: %w", err)
	}
	dir := filepath.Join(filepath.Dir(path), filepath.Base(path)+".d")
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("config directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files, nil
}

// Parse reads one file's settings.
func Parse(r io.Reader, name string) ([]Setting, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(r).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file sets nothing
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of flag names to values", name, root.Line)
	}
	var out []Setting
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("%s:%d", name, k.Line)
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, fmt.Errorf("%s: a key must be a flag name", where)
		}
		s := Setting{Flag: strings.TrimSuffix(k.Value, "+"), Append: strings.HasSuffix(k.Value, "+"), Where: where}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				return nil, fmt.Errorf("%s: %q has no value", where, k.Value)
			}
			s.Values = []string{v.Value}
		case yaml.SequenceNode:
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s: %q: a list of plain values is expected", where, k.Value)
				}
				s.Values = append(s.Values, item.Value)
			}
		case yaml.MappingNode: // node-labels: {rack: a} is rack=a
			for j := 0; j+1 < len(v.Content); j += 2 {
				if v.Content[j].Kind != yaml.ScalarNode || v.Content[j+1].Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s: %q: a mapping of plain keys and values is expected", where, k.Value)
				}
				s.Values = append(s.Values, v.Content[j].Value+"="+v.Content[j+1].Value)
			}
		default:
			return nil, fmt.Errorf("%s: %q: unsupported value", where, k.Value)
		}
		out = append(out, s)
	}
	return out, nil
}

// Apply sets fs's flags from the files in order. A flag already given on the command line
// keeps its value. Within the files, a later setting of a flag replaces an earlier one, and
// an appending one adds to it.
func Apply(fs *pflag.FlagSet, files []string) error {
	var all []Setting
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		settings, err := Parse(strings.NewReader(string(b)), f)
		if err != nil {
			return err
		}
		all = append(all, settings...)
	}
	values := map[string][]string{}
	var order []string
	for _, s := range all {
		if s.Flag == "config" {
			return fmt.Errorf("%s: a configuration file cannot name another (--config)", s.Where)
		}
		fl := fs.Lookup(s.Flag)
		if fl == nil {
			return fmt.Errorf("%s: %q is not a flag of this command", s.Where, s.Flag)
		}
		list := isList(fl)
		if !list && (len(s.Values) != 1 || s.Append) {
			return fmt.Errorf("%s: --%s takes one value", s.Where, s.Flag)
		}
		if !slices.Contains(order, s.Flag) {
			order = append(order, s.Flag)
		}
		if s.Append {
			values[s.Flag] = append(values[s.Flag], s.Values...)
		} else {
			values[s.Flag] = slices.Clone(s.Values)
		}
	}
	for _, name := range order {
		fl := fs.Lookup(name)
		if fl.Changed { // the command line wins
			continue
		}
		vals := values[name]
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			// Replace, not Set: a list flag's Set splits on commas and appends after its first call.
			if err := sv.Replace(vals); err != nil {
				return fmt.Errorf("config: --%s: %w", name, err)
			}
			fl.Changed = true
			continue
		}
		if err := fs.Set(name, vals[0]); err != nil {
			return fmt.Errorf("config: --%s %s: %w", name, strconv.Quote(vals[0]), err)
		}
	}
	return nil
}

func isList(fl *pflag.Flag) bool {
	_, ok := fl.Value.(pflag.SliceValue)
	return ok
}
