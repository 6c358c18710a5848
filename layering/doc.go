// Package layering holds no code: its test keeps the dependency direction
// of the module true. The domain packages in the middle (tiers, merge,
// router, partial) import no driver and no HTTP; only the store adapters
// import a driver; only the HTTP layer imports chi and kin-openapi; nothing
// imports cmd.
package layering
