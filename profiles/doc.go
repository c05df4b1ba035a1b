// Package profiles owns the workload profile: schema v1 (profile.go), the
// matchers that assign threads to thread groups (match.go), strict loading,
// lint, resolution of a pod to a profile, and the builtin profiles.
package profiles
