// Package srcedit applies exact text edits to a copy of upstream sources (skiff's GoBGP fork,
// the patched e2e framework): each edit's old text must occur exactly once in its file, so an
// upstream version that changed the code fails loudly instead of being edited wrongly.
package srcedit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Edit replaces Old with New in File (a path under the tree's root). Why is said in the error
// when the edit no longer applies.
type Edit struct{ File, Why, Old, New string }

// Apply makes every edit under root. An edited file is written as a new file, so a tree of
// hard links to the module cache never writes through to the cache.
func Apply(root string, edits []Edit) error {
	for _, e := range edits {
		path := filepath.Join(root, e.File)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte(e.Old)); n != 1 {
			err := fmt.Errorf("%s: the text to edit occurs %d times (want 1): has the upstream version changed?", e.File, n)
			if e.Why != "" {
				err = fmt.Errorf("%w (the edit: %s)", err, e.Why)
			}
			return err
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		if err := os.WriteFile(path, bytes.Replace(b, []byte(e.Old), []byte(e.New), 1), 0o644); err != nil {
			return err
		}
	}
	return nil
}
