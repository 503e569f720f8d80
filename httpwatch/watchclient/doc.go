// Package watchclient reads a Kubernetes JSON watch stream as a client does (client-go's
// rest/watch decoder, k8s.io/client-go v0.37): Decoder splits the stream into Frames, each with an
// event type and the JSON of its object; AppendFrame writes a frame in the server's wire form.
//
// Invariants:
//   - A Decoder accepts only what client-go accepts: a JSON object per frame, with a known event
//     type and an object that is itself a JSON object; anything else is an error wrapping
//     ErrInvalidFrame (FuzzWatchDecoder in package fuzz).
//   - io.EOF means the stream ended between frames, io.ErrUnexpectedEOF inside one; after an error
//     the Decoder keeps returning it, and frames written with AppendFrame decode to themselves
//     (FuzzWatchDecoder).
package watchclient
