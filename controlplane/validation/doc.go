// Package validation checks skiff's served objects the way upstream's validation does for the
// fields users and components rely on: DNS-1123/1035 names, container and port rules, label
// selectors that must match templates, Service types and ports, and immutable fields. Every
// function is pure: an object (and its old version on update) in, a field.ErrorList out, so the
// API server turns the list into a 422 Invalid Status with one cause per error. Files are
// named by API group, as in registry.
package validation
