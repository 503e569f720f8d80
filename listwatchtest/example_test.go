package listwatchtest_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/listwatch/listwatch/listwatchtest"
)

// A test calls listwatchtest.Start(t, ...), which closes the environment at its cleanup; outside a
// test, New and Close do the same.
func Example() {
	ctx := context.Background()
	env, err := listwatchtest.New(ctx, listwatchtest.WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: map[string]string{"mode": "fast"}},
	))
	if err != nil {
		panic(err)
	}
	defer env.Close()

	client := dynamic.NewForConfigOrDie(env.Config())
	list, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	for _, cm := range list.Items {
		fmt.Println(cm.GetName(), cm.Object["data"])
	}
	key, _ := env.Key("configmaps", "default", "settings")
	fmt.Println(key)
	// Output:
	// settings map[mode:fast]
	// /registry/configmaps/default/settings
}
