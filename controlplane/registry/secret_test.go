package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestMergeStringData(t *testing.T) {
	s := &corev1.Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "two", "c": "3"}}
	MergeStringData(s)
	if s.StringData != nil || string(s.Data["a"]) != "1" || string(s.Data["b"]) != "two" || string(s.Data["c"]) != "3" || len(s.Data) != 3 {
		t.Errorf("merged: data %q stringData %v", s.Data, s.StringData)
	}
	only := &corev1.Secret{StringData: map[string]string{"k": "v"}}
	MergeStringData(only)
	if string(only.Data["k"]) != "v" || only.StringData != nil {
		t.Errorf("stringData alone: %+v", only)
	}
	empty := &corev1.Secret{StringData: map[string]string{}}
	MergeStringData(empty)
	if empty.Data != nil || empty.StringData != nil {
		t.Errorf("empty stringData: %+v", empty)
	}
}
