// A small streaming JSON writer (reports are written by hand; the plan manifest goes
// through protobuf's JSON printer instead).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpc {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(const std::string& key);
  JsonWriter& String(const std::string& value);
  JsonWriter& Number(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  // Key + value in one call.
  template <typename T>
  JsonWriter& Field(const std::string& key, const T& value);

  // The text, with two-space indentation and a final newline.
  std::string Finish();

 private:
  void BeforeValue();
  void Escaped(const std::string& value);
  void Newline();
  std::string out_;
  struct Level {
    bool array;
    bool empty;
  };
  std::vector<Level> stack_;
  bool after_key_ = false;
};

template <>
inline JsonWriter& JsonWriter::Field(const std::string& key, const std::string& value) {
  return Key(key).String(value);
}
template <>
inline JsonWriter& JsonWriter::Field(const std::string& key, const double& value) {
  return Key(key).Number(value);
}
template <>
inline JsonWriter& JsonWriter::Field(const std::string& key, const int64_t& value) {
  return Key(key).Int(value);
}
template <>
inline JsonWriter& JsonWriter::Field(const std::string& key, const bool& value) {
  return Key(key).Bool(value);
}

}  // namespace tpc
