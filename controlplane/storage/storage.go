// Package storage configures how the API server keeps objects in etcd, the way upstream
// does: keys /registry/<resource>/<namespace>/<name> with upstream's special prefixes
// (services/specs, services/endpoints, minions), values in Kubernetes protobuf, one storage
// per resource whose reads and watches are served by k8s.io/apiserver's watch cache (fed by
// one etcd watch per resource), and resourceVersion equal to the etcd mod revision.
package storage

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	skiffscheme "github.com/skiff-sh/skiff/controlplane/scheme"
)

// MediaType is how values are encoded in etcd.
const MediaType = runtime.ContentTypeProtobuf

// SpecialPrefixes are upstream's etcd prefixes that differ from the resource name.
var SpecialPrefixes = map[schema.GroupResource]string{
	corev1.Resource("services"):  "services/specs",
	corev1.Resource("endpoints"): "services/endpoints",
	corev1.Resource("nodes"):     "minions",
}

// NewFactory returns a storage factory for every served group version.
func NewFactory(backend storagebackend.Config, s *runtime.Scheme, codecs serializer.CodecFactory) *serverstorage.DefaultStorageFactory {
	resources := serverstorage.NewResourceConfig()
	resources.EnableVersions(skiffscheme.Served...)
	return serverstorage.NewDefaultStorageFactory(backend, MediaType, codecs,
		serverstorage.NewDefaultResourceEncodingConfig(s), resources, SpecialPrefixes)
}
