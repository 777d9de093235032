// Writes the JPEG seeds of fuzz/corpus (run by make_corpus.py): small gray and colour images,
// baseline 4:4:4 and 4:2:0, progressive, arithmetic-coded and with restart markers, so the fuzzer
// starts from every decoding path libjpeg-turbo has. Usage: make_jpeg_seeds DIR
#include <cstdio>
#include <string>
#include <vector>

#include <jpeglib.h>

namespace {
struct Options {
  const char* name;
  int width, height, components;
  bool subsample, progressive, arithmetic;
  int restart_rows;
};

void write(const std::string& dir, const Options& o) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr errors;
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = o.width;
  cinfo.image_height = o.height;
  cinfo.input_components = o.components;
  cinfo.in_color_space = o.components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 80, TRUE);
  if (o.components == 3 && !o.subsample)
    for (int c = 0; c < 3; ++c) cinfo.comp_info[c].h_samp_factor = cinfo.comp_info[c].v_samp_factor = 1;
  if (o.progressive) jpeg_simple_progression(&cinfo);
  cinfo.arith_code = o.arithmetic;
  cinfo.restart_in_rows = o.restart_rows;
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<unsigned char> row(static_cast<std::size_t>(o.width * o.components));
  while (cinfo.next_scanline < cinfo.image_height) {
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<unsigned char>(i * 13 + cinfo.next_scanline * 29);
    JSAMPROW pointer = row.data();
    jpeg_write_scanlines(&cinfo, &pointer, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::FILE* file = std::fopen((dir + "/" + o.name).c_str(), "wb");
  std::fwrite(buffer, 1, size, file);
  std::fclose(file);
  free(buffer);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const Options seeds[] = {
      {"gray.jpeg", 9, 7, 1, false, false, false, 0},     {"rgb.jpeg", 16, 8, 3, false, false, false, 0},
      {"rgb_420.jpeg", 17, 9, 3, true, false, false, 0},  {"progressive.jpeg", 8, 8, 3, true, true, false, 0},
      {"arithmetic.jpeg", 8, 16, 3, true, false, true, 0}, {"restarts.jpeg", 16, 24, 1, false, false, false, 1},
  };
  for (const auto& seed : seeds) write(argv[1], seed);
}
