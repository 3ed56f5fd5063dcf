package apiserver

import (
	"context"
	"fmt"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/union"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/controlplane/nodeauth"
	"github.com/skiff-sh/skiff/controlplane/rbac"
	"github.com/skiff-sh/skiff/controlplane/rbac/bootstrappolicy"
)

// authz is the API server's authorization step, as kube-apiserver's
// --authorization-mode=Node,RBAC: system:masters may do anything, a node what the Node
// authorizer allows it, everyone what RBAC grants. Roles, bindings and pods come from
// informers over the loopback connection, started once the server listens.
type authz struct {
	factory    informers.SharedInformerFactory
	rbac       *rbac.Authorizer
	authorizer authorizer.Authorizer
	resolver   authorizer.RuleResolver
	synced     []cache.InformerSynced
}

func newAuthz(loopback *restclient.Config) (*authz, error) {
	client, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return nil, err
	}
	// The graph's pods keep only what the Node authorizer reads (nodeauth.SlimPod); RBAC
	// objects lose their managed fields, as every in-process informer's objects do.
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(func(obj any) (any, error) {
		obj, _ = sharedinformers.StripManagedFields(obj)
		return nodeauth.SlimPod(obj)
	}))
	r := f.Rbac().V1()
	a := &authz{factory: f, rbac: rbac.New(rbac.Listers{
		Roles: r.Roles().Lister(), ClusterRoles: r.ClusterRoles().Lister(),
		RoleBindings: r.RoleBindings().Lister(), ClusterRoleBindings: r.ClusterRoleBindings().Lister(),
	})}
	flush := a.rbac.Cached()
	for _, inf := range []cache.SharedIndexInformer{r.Roles().Informer(), r.ClusterRoles().Informer(), r.RoleBindings().Informer(), r.ClusterRoleBindings().Informer()} {
		if _, err := inf.AddEventHandler(flush); err != nil {
			return nil, err
		}
		a.synced = append(a.synced, inf.HasSynced)
	}
	// The Node authorizer's graph: which pods are bound to which node (their Secrets,
	// ConfigMaps, claims and service accounts follow from their specs).
	pods := f.Core().V1().Pods().Informer()
	a.synced = append(a.synced, pods.HasSynced)
	// On a miss, the node's pods are read consistently before a refusal (the informer may lag
	// a binding the node has already seen), unthrottled: every such read stands for a node
	// request that APF has already admitted.
	live := restclient.CopyConfig(loopback)
	live.QPS, live.Burst = -1, 0
	liveClient, err := kubernetes.NewForConfig(live)
	if err != nil {
		return nil, err
	}
	src := nodeauth.NewInformerSource(pods, nil)
	src.Live = nodeauth.ListPodsOnNode(liveClient)
	nodes := nodeauth.New(src, bootstrappolicy.NodeRules())
	a.authorizer, err = union.New(
		union.NamedAuthorizer{AuthorizerName: "privileged", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)},
		union.NamedAuthorizer{AuthorizerName: "node", Authorizer: nodes},
		union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: a.rbac},
	)
	if err != nil {
		return nil, err
	}
	a.resolver = union.NewRuleResolvers(nodes, a.rbac)
	return a, nil
}

// guard is the escalation check of role and binding writes.
func (a *authz) guard() *rbac.Guard { return &rbac.Guard{Rules: a.rbac, Authorizer: a.authorizer} }

// postStartHook starts the informers and reconciles the bootstrap policy; the server is
// ready only after both, so no request is refused for want of a role that is being created.
func (a *authz) postStartHook(ctx context.Context, log *slog.Logger) genericapiserver.PostStartHookFunc {
	return func(hc genericapiserver.PostStartHookContext) error {
		a.factory.Start(ctx.Done())
		if !cache.WaitForCacheSync(hc.Done(), a.synced...) {
			return fmt.Errorf("authorization informers did not sync")
		}
		client, err := kubernetes.NewForConfig(hc.LoopbackClientConfig)
		if err != nil {
			return err
		}
		var last error
		if err := wait.PollUntilContextTimeout(hc, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			last = bootstrappolicy.Reconcile(ctx, client, log)
			return last == nil, nil
		}); err != nil {
			return fmt.Errorf("bootstrap RBAC policy: %w (last: %v)", err, last)
		}
		return nil
	}
}
