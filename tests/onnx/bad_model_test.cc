// Bad input never crashes the loader: each malformed model gets a one-line error naming what
// and where.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "onnx/model.h"
#include "onnx_genai/session.h"
#include "onnx_model_builder.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::ModelBuilder;

class BadModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("og_bad_model_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  static std::string error_of(const std::string& path) {
    auto s = Session::load(path);
    EXPECT_FALSE(s.is_ok());
    const std::string msg = s.is_ok() ? "" : s.status().message();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "error must be one line: " << msg;
    return msg;
  }
  // The Add model with its weight moved to external data described by `entries`.
  static ModelBuilder external_model(const std::vector<std::pair<std::string, std::string>>& entries) {
    ModelBuilder b = add_model();
    auto* w = b.graph().mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [key, value] : entries) {
      auto* e = w->add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    return b;
  }
  static ModelBuilder add_model() {
    ModelBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2});
    b.initializer_f32("w", {2}, {1, 2});
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y", onnx::TensorProto::FLOAT);
    return b;
  }
  fs::path dir_;
};

TEST_F(BadModel, MissingFile) {
  EXPECT_NE(error_of((dir_ / "nope.onnx").string()).find("nope.onnx"), std::string::npos);
}

TEST_F(BadModel, WrongMagic) {
  const std::string msg = error_of(write("m.onnx", "\x89PNG\r\n\x1a\nnot a model at all"));
  EXPECT_NE(msg.find("m.onnx"), std::string::npos) << msg;
}

TEST_F(BadModel, Truncated) {
  std::string bytes = add_model().bytes();
  for (size_t cut : {bytes.size() / 2, bytes.size() - 3, size_t{5}}) {
    const std::string msg = error_of(write("t.onnx", bytes.substr(0, cut)));
    EXPECT_NE(msg.find("t.onnx"), std::string::npos) << msg;
  }
}

TEST_F(BadModel, InitializerShorterThanShape) {
  ModelBuilder b = add_model();
  b.graph().mutable_initializer(0)->add_dims(3);  // [2] -> [2,3] but still 2 floats
  const std::string msg = error_of(write("s.onnx", b.bytes()));
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs 24"), std::string::npos) << msg;
}

TEST_F(BadModel, UnknownDtype) {
  ModelBuilder b = add_model();
  b.graph().mutable_initializer(0)->set_data_type(99);
  const std::string msg = error_of(write("d.onnx", b.bytes()));
  EXPECT_NE(msg.find("unsupported data type 99"), std::string::npos) << msg;
}

TEST_F(BadModel, MissingExternalData) {
  ModelBuilder b = external_model({{"location", "weights.bin"}});
  const std::string msg = error_of(write("e.onnx", b.bytes()));
  EXPECT_NE(msg.find("missing external data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weights.bin"), std::string::npos) << msg;

  write("weights.bin", std::string(4, '\0'));  // 4 bytes, 8 needed
  const std::string short_msg = error_of((dir_ / "e.onnx").string());
  EXPECT_NE(short_msg.find("weights.bin"), std::string::npos) << short_msg;
}

TEST_F(BadModel, ExternalDataOffsetsValidated) {
  write("weights.bin", std::string(64, '\0'));
  for (const auto& [key, value, expect] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"offset", "60", "outside"},
                                                                        {"offset", "abc", "not a number"},
                                                                        {"location", "../weights.bin", "leaves the model folder"},
                                                                        {"location", "/etc/passwd", "must be relative"}}) {
    ModelBuilder b = key == "location" ? external_model({{"location", value}})
                                       : external_model({{"location", "weights.bin"}, {key, value}});
    const std::string msg = error_of(write("x.onnx", b.bytes()));
    EXPECT_NE(msg.find(expect), std::string::npos) << key << "=" << value << ": " << msg;
  }
}

TEST_F(BadModel, ExternalDataLoadsWhenValid) {
  const float values[2] = {10, 20};
  write("weights.bin", std::string(16, '\0') + std::string(reinterpret_cast<const char*>(values), 8));
  ModelBuilder b = external_model({{"location", "weights.bin"}, {"offset", "16"}, {"length", "8"}});
  auto model = load_onnx_model(write("ok.onnx", b.bytes()));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const Value* wv = (*model)->graph->find_value("w");
  ASSERT_NE(wv, nullptr);
  EXPECT_EQ(wv->initializer.data<float>()[1], 20.0f);
  EXPECT_EQ((*model)->stats.initializer_bytes_mapped, 8);  // offset 16 is aligned: no copy
}

TEST_F(BadModel, GraphCycle) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2});
  b.node("Add", {"x", "b"}, {"a"}, "first");
  b.node("Relu", {"a"}, {"b"}, "second");
  b.output("b", onnx::TensorProto::FLOAT);
  const std::string msg = error_of(write("c.onnx", b.bytes()));
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
}

TEST_F(BadModel, EveryUnsupportedOpIsListedAtLoad) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2});
  b.node("FancyOp", {"x"}, {"a"}, "fancy_1");
  b.node("OtherOp", {"a"}, {"y"}, "other_1");
  b.output("y", onnx::TensorProto::FLOAT);
  const std::string msg = error_of(write("u.onnx", b.bytes()));
  EXPECT_NE(msg.find("2 unsupported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FancyOp (node 'fancy_1')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("OtherOp (node 'other_1')"), std::string::npos) << msg;
}

TEST_F(BadModel, UndeclaredDomain) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2});
  b.node("Relu", {"x"}, {"y"}).set_domain("com.example");
  b.output("y", onnx::TensorProto::FLOAT);
  const std::string msg = error_of(write("dom.onnx", b.bytes()));
  EXPECT_NE(msg.find("com.example"), std::string::npos) << msg;
}

TEST_F(BadModel, WrongInputAtBind) {
  auto session = Session::load(write("good.onnx", add_model().bytes()));
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto wrong_dtype = (*session)->run({Tensor::from_vector<int64_t>(Shape{2}, std::vector<int64_t>{1, 2})});
  ASSERT_FALSE(wrong_dtype.is_ok());
  EXPECT_NE(wrong_dtype.status().message().find("dtype int64"), std::string::npos) << wrong_dtype.status().message();
  auto wrong_rank = (*session)->run({Tensor::from_vector<float>(Shape{1, 2}, std::vector<float>{1, 2})});
  ASSERT_FALSE(wrong_rank.is_ok());
  EXPECT_NE(wrong_rank.status().message().find("rank 2"), std::string::npos) << wrong_rank.status().message();
  auto wrong_dim = (*session)->run({Tensor::from_vector<float>(Shape{3}, std::vector<float>{1, 2, 3})});
  ASSERT_FALSE(wrong_dim.is_ok());
  auto missing = (*session)->run_named({});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'x' is missing"), std::string::npos);
}

// Opset 18 gave every Reduce* op an axes input; Debian's libonnx (ONNX 1.12) only knows opset 17,
// so the loader must not take its older ReduceMean schema for the newer one (torch.onnx's dynamo
// exporter writes ReduceMean(x, axes) at opset 18+), yet still count the inputs.
TEST_F(BadModel, NewerOpsetInputCountsAreChecked) {
  const auto reduce_mean = [](int inputs) {
    ModelBuilder b(20);
    b.input("x", onnx::TensorProto::FLOAT, {2, 3});
    b.initializer_i64("axes", {1}, {-1});
    std::vector<std::string> names = {"x", "axes", "axes"};
    names.resize(static_cast<size_t>(inputs));
    b.node("ReduceMean", names, {"y"}, "mean");
    b.output("y", onnx::TensorProto::FLOAT);
    return b;
  };
  auto session = Session::load(write("mean18.onnx", reduce_mean(2).bytes()));
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto out = (*session)->run({Tensor::from_vector<float>(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 9})});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 1}));
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 6.0f);
  const std::string msg = error_of(write("mean18_3.onnx", reduce_mean(3).bytes()));
  EXPECT_NE(msg.find("ReduceMean (node 'mean') has 3 inputs; opset 20 allows 1 to 2"), std::string::npos) << msg;
}

}  // namespace
}  // namespace onnx_genai
