// A sigma edge program that draws a link as two halves, Boxfish style: the
// half at the source end in `color` (what leaves the source), the half at
// the target end in `color2` (what leaves the target). One GL line pair per
// link, so 17k links stay cheap to re-colour.
import { EdgeProgram } from "sigma/rendering";
import type { ProgramInfo } from "sigma/rendering";
import type { EdgeDisplayData, NodeDisplayData, RenderParams } from "sigma/types";
import { floatColor } from "sigma/utils";

const VERTEX = /* glsl */ `
attribute vec2 a_position;
attribute vec4 a_color;
attribute vec4 a_id;
uniform mat3 u_matrix;
varying vec4 v_color;
void main() {
  gl_Position = vec4((u_matrix * vec3(a_position, 1)).xy, 0, 1);
  #ifdef PICKING_MODE
  v_color = a_id;
  #else
  v_color = a_color;
  #endif
  v_color.a *= 255.0 / 254.0;
}
`;

const FRAGMENT = /* glsl */ `
precision mediump float;
varying vec4 v_color;
void main() {
  gl_FragColor = v_color;
}
`;

export interface HalfEdgeData extends EdgeDisplayData {
  color2?: string;
}

const { FLOAT, UNSIGNED_BYTE } = WebGLRenderingContext;

export class HalfEdgeProgram extends EdgeProgram<"u_matrix"> {
  getDefinition() {
    return {
      VERTICES: 4,
      VERTEX_SHADER_SOURCE: VERTEX,
      FRAGMENT_SHADER_SOURCE: FRAGMENT,
      METHOD: WebGLRenderingContext.LINES,
      UNIFORMS: ["u_matrix"] as const,
      ATTRIBUTES: [
        { name: "a_position", size: 2, type: FLOAT },
        { name: "a_color", size: 4, type: UNSIGNED_BYTE, normalized: true },
        { name: "a_id", size: 4, type: UNSIGNED_BYTE, normalized: true },
      ],
    };
  }

  processVisibleItem(edgeIndex: number, startIndex: number, source: NodeDisplayData, target: NodeDisplayData, data: EdgeDisplayData): void {
    const a = this.array;
    const c1 = floatColor(data.color);
    const c2 = floatColor((data as HalfEdgeData).color2 ?? data.color);
    const mx = (source.x + target.x) / 2;
    const my = (source.y + target.y) / 2;
    let i = startIndex;
    a[i++] = source.x;
    a[i++] = source.y;
    a[i++] = c1;
    a[i++] = edgeIndex;
    a[i++] = mx;
    a[i++] = my;
    a[i++] = c1;
    a[i++] = edgeIndex;
    a[i++] = mx;
    a[i++] = my;
    a[i++] = c2;
    a[i++] = edgeIndex;
    a[i++] = target.x;
    a[i++] = target.y;
    a[i++] = c2;
    a[i++] = edgeIndex;
  }

  setUniforms(params: RenderParams, { gl, uniformLocations }: ProgramInfo): void {
    gl.uniformMatrix3fv(uniformLocations.u_matrix, false, params.matrix);
  }
}
