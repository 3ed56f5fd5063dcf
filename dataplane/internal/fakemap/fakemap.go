// Package fakemap is a BPF hash map in memory, for unit tests of the code that writes
// skiff's maps: the same calls as *ebpf.Map (Update, Put, Delete, Lookup, NextKey) with the
// kernel's answers — a full map refuses a new key (E2BIG), a missing key is
// ebpf.ErrKeyNotExist, NextKey walks the keys in a fixed order from the first when given
// nil — and every entry rendered as text, so a test names the state it expects.
package fakemap

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Map holds entries keyed by the key value itself (bpf2go's key types are comparable).
type Map struct {
	what    string
	max     uint32
	entries map[any]any
	// Writes counts every Update, Put and Delete that changed the map.
	Writes int
	// Log, when not nil, gets one line per write ("put <what> key value" or "delete <what>
	// key"), shared between maps to see the order writes reached them in.
	Log *[]string
	// order and at are the keys' walking order and each key's place in it, made on the first
	// NextKey after the key set changed.
	order []any
	at    map[any]int
}

// New is an empty map called what, holding at most max entries.
func New(what string, max int) *Map {
	return &Map{what: what, max: uint32(max), entries: map[any]any{}}
}

// Update writes value at key (flags are ignored: every write may create or replace).
func (f *Map) Update(key, value any, _ ebpf.MapUpdateFlags) error {
	key, value = deref(key), deref(value)
	if _, ok := f.entries[key]; !ok {
		if uint32(len(f.entries)) >= f.max {
			return fmt.Errorf("update %s: %w", f.what, unix.E2BIG)
		}
		f.order = nil
	}
	f.entries[key] = value
	f.Writes++
	f.log("put %s %+v %+v", f.what, key, value)
	return nil
}

// Put is Update with any flags.
func (f *Map) Put(key, value any) error { return f.Update(key, value, ebpf.UpdateAny) }

// Delete removes key.
func (f *Map) Delete(key any) error {
	key = deref(key)
	if _, ok := f.entries[key]; !ok {
		return fmt.Errorf("delete %s: %w", f.what, ebpf.ErrKeyNotExist)
	}
	delete(f.entries, key)
	f.order = nil
	f.Writes++
	f.log("delete %s %+v", f.what, key)
	return nil
}

// Lookup writes key's value to valueOut (a pointer).
func (f *Map) Lookup(key, valueOut any) error {
	v, ok := f.entries[deref(key)]
	if !ok {
		return fmt.Errorf("lookup %s: %w", f.what, ebpf.ErrKeyNotExist)
	}
	reflect.ValueOf(valueOut).Elem().Set(reflect.ValueOf(v))
	return nil
}

// NextKey writes the key after key (the first when key is nil, or when key is not in the
// map, as the kernel does) to out, or returns ebpf.ErrKeyNotExist after the last.
func (f *Map) NextKey(key, out any) error {
	if f.order == nil {
		f.order, f.at = f.keys(), map[any]int{}
		for i, k := range f.order {
			f.at[k] = i
		}
	}
	i := 0
	if key != nil {
		if j, ok := f.at[deref(key)]; ok {
			i = j + 1
		}
	}
	if i >= len(f.order) {
		return ebpf.ErrKeyNotExist
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(f.order[i]))
	return nil
}

// MaxEntries is the map's capacity.
func (f *Map) MaxEntries() uint32 { return f.max }

// String names the map, as *ebpf.Map's String does.
func (f *Map) String() string { return "fake " + f.what }

// Len is the number of entries.
func (f *Map) Len() int { return len(f.entries) }

// Lines are the entries as "<what> key value", one per entry, sorted.
func (f *Map) Lines() []string {
	lines := make([]string, 0, len(f.entries))
	for k, v := range f.entries {
		lines = append(lines, fmt.Sprintf("%s %+v %+v", f.what, k, v))
	}
	slices.Sort(lines)
	return lines
}

// Render is the entries of maps, one per line as Lines prints them, sorted.
func Render(maps ...*Map) string {
	var lines []string
	for _, m := range maps {
		lines = append(lines, m.Lines()...)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func (f *Map) keys() []any {
	keys := make([]any, 0, len(f.entries))
	for k := range f.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b any) int { return strings.Compare(fmt.Sprintf("%+v", a), fmt.Sprintf("%+v", b)) })
	return keys
}

func (f *Map) log(format string, args ...any) {
	if f.Log != nil {
		*f.Log = append(*f.Log, fmt.Sprintf(format, args...))
	}
}

// deref is the value a pointer argument points at (the ebpf package takes either).
func deref(v any) any {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}
