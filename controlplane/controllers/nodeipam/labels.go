package nodeipam

import "k8s.io/apimachinery/pkg/labels"

func labelsEverything() labels.Selector { return labels.Everything() }
