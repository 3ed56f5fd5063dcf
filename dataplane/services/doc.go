// Package services is what the Service maps hold and how they are written. compile.go turns
// Services, EndpointSlices and host ports into frontends and backends with no I/O (sticky
// per client with sessionAffinity ClientIP, Maglev by annotation, node-local with the
// traffic policies); maps.go encodes them for the kernel and the Programmer applies either
// one Service's change or the whole state as the difference to what the maps hold, through
// the table interface of tables.go, so unit tests run the same writes against in-memory
// fakes; capacity.go decides what fits maps of a given size and says what was left out.
package services
