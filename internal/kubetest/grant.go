package kubetest

import (
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "grant-" + RandomHex(4)
	if _, err := api.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("grant %s in %s: %v", user, ns, err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}
	reviewUser := user
	if saNS, sa, ok := strings.Cut(user, "/"); ok {
		subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa}
		reviewUser = "system:serviceaccount:" + saNS + ":" + sa
	}
	if _, err := api.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects: []rbacv1.Subject{subject}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("grant %s in %s: %v", user, ns, err)
	}
	for _, r := range rules {
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					api.awaitAllowed(ctx, t, reviewUser, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: res})
				}
			}
		}
	}
}

// awaitAllowed polls a SubjectAccessReview until user may do attrs, or
// fails the test when ctx ends.
func (api *Server) awaitAllowed(ctx context.Context, t testing.TB, user string, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	for {
		review, err := api.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("waiting for %s to be allowed to %s %s in %s: %v", user, attrs.Verb, attrs.Resource, attrs.Namespace, err)
		}
		if review.Status.Allowed {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s is still not allowed to %s %s in %s a minute after the grant", user, attrs.Verb, attrs.Resource, attrs.Namespace)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
