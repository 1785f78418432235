package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

func cacheFor(namespace string) cache.Options {
	return cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}}
}

// ctrlConfig lets several managers in one process register controllers of the same name.
func ctrlConfig(skipNameValidation *bool) config.Controller {
	return config.Controller{SkipNameValidation: skipNameValidation}
}
