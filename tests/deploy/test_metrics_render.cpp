// test_metrics_render.cpp — the numbers of gpt-server's histograms (deploy/server/metrics.cpp) as
// Prometheus reads them: every _sum and bucket bound must parse back to the exact double it was.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "metrics.h"

namespace {

// The value on the line of `text` that starts with `prefix` (the text after its last space).
double value_of(const std::string &text, const std::string &prefix) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
    FAIL("no line starts with " << prefix << " in:\n" << text);
    return 0;
}

}  // namespace

TEST_CASE("a histogram's sum keeps every digit past a million seconds") {
    server::Histogram histogram({0.1, 1});
    histogram.observe(1234567.0);
    histogram.observe(0.125);
    histogram.observe(0.000244140625);  // 2^-12: exact in binary, lost at 6 significant digits
    const std::string text = histogram.render("t");
    CHECK(value_of(text, "t_sum ") == 1234567.125244140625);
    CHECK(value_of(text, "t_count ") == 3);
}

TEST_CASE("bucket bounds are printed as written, not widened to 17 digits") {
    server::Histogram histogram({0.0001, 0.1, 2.5});
    histogram.observe(0.05);
    const std::string text = histogram.render("t");
    CHECK(text.find("t_bucket{le=\"0.0001\"} 0\n") != std::string::npos);
    CHECK(text.find("t_bucket{le=\"0.1\"} 1\n") != std::string::npos);
    CHECK(text.find("t_bucket{le=\"2.5\"} 1\n") != std::string::npos);
    CHECK(text.find("t_bucket{le=\"+Inf\"} 1\n") != std::string::npos);
}
