package printers

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventsV1 prints events.k8s.io/v1 events with the same columns.
var EventsV1 = Custom(func(o runtime.Object) []any {
	e := o.(*eventsv1.Event)
	core := &corev1.Event{ObjectMeta: e.ObjectMeta, EventTime: e.EventTime, ReportingController: e.ReportingController,
		Reason: e.Reason, InvolvedObject: e.Regarding, Message: e.Note, Type: e.Type, Source: e.DeprecatedSource,
		FirstTimestamp: e.DeprecatedFirstTimestamp, LastTimestamp: e.DeprecatedLastTimestamp, Count: e.DeprecatedCount}
	if e.Series != nil {
		core.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return eventRow(core)
}, eventColumns...)
