package engine

// RacyWindow is racyWindow for the external tests (engine_test.go): a file written this long
// before a build is recorded by it.
const RacyWindow = racyWindow
