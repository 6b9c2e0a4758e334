// Package checkpoint implements both sides of the checkpoint-and-yield
// protocol that `kubectl gang-drain` speaks with training controllers (see
// docs/checkpoint-and-yield.md).
//
// A requester asks a training gang, through annotations on the gang's root
// object (a JobSet, Job, TrainJob ...), to write a durable checkpoint, pause
// stepping and report that it is ready to stop. The gang's controller or its
// rank-0 agent answers through more annotations on the same object. The
// package owns the annotation keys, the parsing of requests and responses,
// the pure evaluation of a response against the protocol's timeouts, the
// Requester that writes requests (and mirrors them onto the gang's pods) and
// the Responder a controller or agent can embed.
//
// It never prints, never exits, never stops a gang and never decides what
// a drain does on a timeout: it returns typed verdicts and leaves policy to
// its callers.
package checkpoint
