// Package cursor makes and checks the cursors of the API: the signed
// next_cursor of a read, which resumes exactly at a position of one
// request, and the checked next_cursor of a series listing.
//
// A read's cursor resumes at a time position, and the next page reads each
// partition from that position with a clustering-key slice (t >= position,
// or t < position descending). That is what the driver's paging state
// would buy — Cassandra seeks straight to the row — and unlike a paging
// state it is exact for a merged stream: the merge stops at a watermark
// between rows of several event-bucket partitions, while each driver page
// ends wherever its fetch ended. The cursor thus never carries a driver
// paging state (which holds primary-key data); it carries only the
// request's digest (Binding), range, plan and position, signed with the
// deployment's key (Signer), so that a forged, truncated or mismatched
// cursor is refused.
//
// A listing's cursor is the last id of a page, versioned and checked, so
// that only a next_cursor the gateway issued resumes a listing.
package cursor
