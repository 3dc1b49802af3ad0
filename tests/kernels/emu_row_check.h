// The emulator tests' check of one row against its CPU reference: the output's relative error
// (||got - want|| / ||want||, all of the row's heads) and the largest relative LSE error, printed
// and each held to 1e-2 (the GPU check's bound for bf16 outputs). An unwritten (NaN) output or
// LSE fails.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"

class PwEmuRowCheck {
 public:
  void Out(double got, double want) {
    got_.push_back(got);
    want_.push_back(want);
  }
  void Lse(double got, double want) {
    const double e = std::fabs(got - want) / std::max(1.0, std::fabs(want));
    if (!(e <= lse_err_)) lse_err_ = e;  // a NaN stays NaN, and fails
  }
  // `what`: the row and the block's shape, for the failure message.
  void Expect(const std::string& what) const {
    double num = 0, den = 0;
    for (size_t i = 0; i < got_.size(); ++i) {
      num += (got_[i] - want_[i]) * (got_[i] - want_[i]);
      den += want_[i] * want_[i];
    }
    const double err = std::sqrt(num / std::max(den, 1e-300));
    std::printf("%s: relative error %.2e, lse %.2e\n", what.c_str(), err, lse_err_);
    EXPECT_LE(err, 1e-2) << what;
    EXPECT_LE(lse_err_, 1e-2) << what;
  }

 private:
  std::vector<double> got_, want_;
  double lse_err_ = 0;
};
