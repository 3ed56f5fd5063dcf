package nodelifecycle

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

type metav1Time = metav1.Time
