// Package chart draws the project's pictures in one house style on top of
// gonum/plot: Liberation Sans, a colour-vision-safe palette with a marker
// and dash pattern per series, logarithmic axes that place zeros on a
// marked floor, and the legend below the plot so it never hides data. A
// Figure renders to SVG or PNG, byte-identically for the same input, and
// Write puts several figures into a directory whole or not at all.
//
// Lines is the general helper for a few named series (metric per step, per
// level); callers that need more build on Figure.Plot with gonum's plotters.
//
// It is its own package so that packages which only compute (analyze,
// synthesize, profiles, scheduler) do not link gonum/plot and its fonts.
package chart
