package kubetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Grant gives user the rules in namespace ns: a Role and a RoleBinding,
// as an admin would. user is a user name, or "namespace/name" for a
// service account. It returns once the API server's authorizer allows
// every verb bound: RBAC decides from a watch cache, so a check made as
// soon as the binding exists can still see the old rights (seen in CI: a
// "create jobs" granted a moment earlier, still refused).
func (api *Server) Grant(t testing.TB, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := "grant-" + RandomHex(4)
	if _, err := api.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("grant %s in %s: %v", user, ns, err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}
	if saNS, sa, ok := strings.Cut(user, "/"); ok {
		subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa}
	}
	if _, err := api.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects: []rbacv1.Subject{subject}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("grant %s in %s: %v", user, ns, err)
	}
	var attrs []authorizationv1.ResourceAttributes
	for _, r := range rules {
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: res})
				}
			}
		}
	}
	api.AwaitAllowed(t, user, attrs...)
}

// AwaitAllowed returns once the API server's authorizer allows user (a
// user name, or "namespace/name" for a service account) every one of
// attrs, and fails the test if a minute passes first. A test that checks
// rights as soon as a binding exists (its own, or one the code under test
// made) waits here: RBAC decides from a watch cache.
func (api *Server) AwaitAllowed(t testing.TB, user string, attrs ...authorizationv1.ResourceAttributes) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := api.WaitAllowed(ctx, user, attrs...); err != nil {
		t.Fatal(err)
	}
}

// WaitAllowed is AwaitAllowed for a goroutine that may not fail the test
// itself: it returns the error, or ctx's when ctx ends first.
func (api *Server) WaitAllowed(ctx context.Context, user string, attrs ...authorizationv1.ResourceAttributes) error {
	if saNS, sa, ok := strings.Cut(user, "/"); ok {
		user = "system:serviceaccount:" + saNS + ":" + sa
	}
	for _, a := range attrs {
		for {
			review, err := api.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &a}}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("waiting for %s to be allowed to %s %s in %s: %w", user, a.Verb, a.Resource, a.Namespace, err)
			}
			if review.Status.Allowed {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s is still not allowed to %s %s in %s: %w", user, a.Verb, a.Resource, a.Namespace, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}
