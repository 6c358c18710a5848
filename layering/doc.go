// Package layering holds no code: its tests keep the dependency direction
// of the module true, as rules rather than a list of today's imports.
// Packages sit in layers from the centre (the storage model, the pure
// domain logic) outwards (services, front ends, assembly, commands) and
// import inwards only; the store adapters import only tiers (its
// sealed form and the generic merge) and their driver; the pure packages do no I/O; drivers and HTTP libraries are
// imported only where they belong; nothing imports a command; and test
// support is imported only by tests. The integration tests are checked
// with their build tags set.
package layering
