package apiserver

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// WaitReady waits until the API server a kubeconfig names answers /readyz with ok — the file
// itself may not exist yet (the server writes it as it starts) — or ctx ends. The parts that
// run beside the API server in `skiff server` (scheduler, controllers, the node agent) start
// with it instead of being started by the server.
func WaitReady(ctx context.Context, kubeconfig string) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if _, err := os.Stat(kubeconfig); err != nil {
			last = err
			return false, nil
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			last = err
			return false, nil
		}
		cfg.Timeout = 2 * time.Second
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return false, err
		}
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			last = fmt.Errorf("/readyz: %v %s", err, body)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server (%s): %w (last: %v)", kubeconfig, err, last)
	}
	return nil
}
