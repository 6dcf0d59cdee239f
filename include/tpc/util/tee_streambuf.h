// An output stream buffer that forwards every byte to another buffer and shows it to
// an observer on the way (the plan writer hashes weight files while writing them,
// instead of reading them back).
#pragma once

#include <cstddef>
#include <functional>
#include <streambuf>

namespace tpc {

class TeeStreambuf : public std::streambuf {
 public:
  using Observer = std::function<void(const char* data, size_t size)>;
  TeeStreambuf(std::streambuf* target, Observer observer)
      : target_(target), observer_(std::move(observer)) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const std::streamsize written = target_->sputn(s, n);
    if (written > 0) observer_(s, static_cast<size_t>(written));
    return written;
  }
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    return xsputn(&c, 1) == 1 ? ch : traits_type::eof();
  }
  int sync() override { return target_->pubsync(); }

 private:
  std::streambuf* target_;
  Observer observer_;
};

}  // namespace tpc
