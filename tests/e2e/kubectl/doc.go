// Package kubectl is the end-to-end suite that drives the real kubectl (1.33 and 1.27)
// against `skiff server --disable-agent` and checks what it prints and what the API holds.
package kubectl
