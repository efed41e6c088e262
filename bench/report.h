// bench/report.h -- benchmark results as a terminal table, JSON (schema: docs/bench-json.md),
// CSV and SVG plots.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/compare.h"
#include "bench/replay.h"
#include "bench/stats.h"
#include "bench/svg.h"

namespace nvfp4::bench {

constexpr const char* kJsonSchema = "nvfp4-bench/1";

// The top level of every JSON report: schema, date, commit, command, machine (incl. GPU/driver).
// argv empty: this process's command line (/proc/self/cmdline).
nlohmann::json report_envelope(std::vector<std::string> argv = {});
nlohmann::json to_json(const ReplayResult& r);
nlohmann::json to_json(const Row& r);
nlohmann::json to_json(const CompareRun& run, const CompareStats& s, const nlohmann::json& workload);

std::string replay_table(const ReplayResult& r);
std::string rows_table(const std::vector<Row>& rows);
std::string compare_text(const CompareRun& run, const CompareStats& s);

// One CSV per kind; every row self-describing (header line first).
std::string replays_csv(const std::vector<ReplayResult>& rs);
std::string rows_csv(const std::vector<Row>& rows);
std::string compare_csv(const CompareRun& run);

// Roofline points of every replay variant and shape row.
std::vector<RooflinePoint> roofline_points(const std::vector<ReplayResult>& rs, const std::vector<Row>& rows);

// Writes text to `path` ("-" = stdout); throws nvfp4::Error naming the path on failure.
void write_text(const std::string& path, const std::string& text);
// Writes an SVG, and if `path` ends in .png converts it with rsvg-convert (librsvg2-bin) or
// ImageMagick's convert; throws naming the tool when neither is installed.
void write_plot(const std::string& path, const std::string& svg);

}  // namespace nvfp4::bench
